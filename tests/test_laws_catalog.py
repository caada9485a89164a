"""Laws of inference over every catalog model and device, in every time mode where they hold.

Each law is parametrized over `catalog_names("models")`, so a model added to the catalog is covered
without touching this file; hypothesis draws the device, the mode, B, S and P. The catalog spans every
attention and MLP kind the engine has: MHA, GQA, MQA, MLA, CLA, sliding window, hybrid local/global,
chunked local attention, linear attention and MoE (with shared experts, dense leading layers and
dense/MoE patterns).

Modes: roofline (the ideal bound), achievable (a good implementation's estimate) and simple (the
lecture's (weights + B * KV) / bandwidth). A (model, device) pair the achievable mode cannot price (the
device spec lacks the measured term a format needs, e.g. a weight-only mxfp4 kernel for gpt-oss's
experts) is skipped in that mode only; `ACHIEVABLE` lists the models that have at least one such device,
and a law is never run on fewer than those. Where a law does not hold in a mode, its docstring says so
and why, and the test checks the weaker statement that does hold.
"""
import functools
import warnings

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import perfmodel as pm
from perfmodel import api, engine, whatif
from perfmodel.errors import DataWarning, SpecError
from perfmodel.formats import get_format, known_formats
from perfmodel.ops import COMM, Layout, Precision, build_ops
from perfmodel.specs import load_impl

MODEL_NAMES = pm.catalog_names("models")
HW_NAMES = pm.catalog_names("hardware")
MODELS = {n: pm.load_model(n) for n in MODEL_NAMES}
HARDWARE = {n: pm.load_hardware(n) for n in HW_NAMES}
MODES = ("roofline", "achievable", "simple")
PREFERRED = ["h100-sxm", "b200", "mi300x", "a100-80gb-sxm"]  # tried first when looking for a priceable device


def _priceable(m, hw, mode) -> bool:
    """Whether the mode can price this model on this device at all (the spec has every term it needs)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DataWarning)
            engine.evaluate(m, hw, 1.0, 16.0, "decode", mode)
        return True
    except SpecError:
        return False


@functools.lru_cache(maxsize=None)
def achievable_anywhere(name: str) -> bool:
    m = MODELS[name]
    order = [h for h in PREFERRED if h in HARDWARE] + [h for h in HW_NAMES if h not in PREFERRED]
    return any(_priceable(m, HARDWARE[h], "achievable") for h in order)


def modes_for(name):
    """The modes a law runs in for this model: achievable only where some catalog device prices it."""
    return st.sampled_from([md for md in MODES if md != "achievable" or achievable_anywhere(name)])


def evaluate(m, hw, B, S, phase="decode", mode="roofline", layout=None, **kw):
    """engine.evaluate, or None when the device spec lacks a term this mode or layout needs (the law then
    does not apply to that draw); any other error is a failure."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DataWarning)
            return engine.evaluate(m, hw, B, S, phase, mode, layout=layout, **kw)
    except SpecError as e:
        if "missing" in str(e) or "is needed" in str(e) or "has no" in str(e):
            return None
        raise


def chunked(m) -> bool:
    return "C" in m.layer_kinds()


hardware = st.sampled_from(HW_NAMES)  # names, so a failing draw prints short; HARDWARE[name] is the spec
contexts = st.lists(st.integers(1, 2**17), min_size=2, max_size=12, unique=True).map(sorted)
prompts = st.lists(st.integers(1, 16384), min_size=2, max_size=8, unique=True).map(sorted)
batches = st.lists(st.integers(1, 2048), min_size=1, max_size=5, unique=True).map(sorted)


def _divisors(n, limit=8):
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]


@st.composite
def layouts(draw, m, pp=True, ep=True):
    """A valid layout of one replica: tp dividing the heads (and the KV heads, or a multiple of them), pp up
    to 4 stages, ep dividing the experts of a MoE model."""
    tps = [t for t in _divisors(m.N) if m.K % t == 0 or t % m.K == 0]
    tp = draw(st.sampled_from(tps))
    p = draw(st.sampled_from([x for x in (1, 2, 3, 4) if x <= m.n_layers])) if pp else 1
    e = draw(st.sampled_from(_divisors(m.moe.n_experts))) if (ep and m.moe) else 1
    return Layout(tp=tp, pp=p, ep=e)


models = pytest.mark.parametrize("name", MODEL_NAMES)


def test_the_catalog_spans_every_attention_and_mlp_kind():
    """The laws below are only as broad as the catalog: it must hold each kind at least once."""
    ms = MODELS.values()
    kinds = {"MHA": any(m.K == m.N and not m.mla for m in ms), "GQA": any(1 < m.K < m.N for m in ms),
             "MQA": any(m.K == 1 and not m.mla for m in ms), "MLA": any(m.mla for m in ms),
             "CLA": any(m.kv_share > 1 for m in ms), "sliding window": any(set(m.layer_kinds()) == {"L"} for m in ms),
             "hybrid": any({"L", "G"} <= set(m.layer_kinds()) for m in ms), "chunked": any(chunked(m) for m in ms),
             "linear": any("R" in m.layer_kinds() for m in ms), "MoE": any(m.moe for m in ms),
             "plain MLP": any(m.mlp == "plain" for m in ms)}
    assert all(kinds.values()), [k for k, v in kinds.items() if not v]
    assert sum(map(achievable_anywhere, MODEL_NAMES)) >= len(MODEL_NAMES) - 2  # gpt-oss 20b/120b: mxfp4 experts


# ---------------------------------------------------------------- latency and the context
@models
@settings(max_examples=3, deadline=None)
@given(data=st.data())
def test_decode_latency_never_falls_as_the_context_or_the_batch_grows(name, data):
    """More context means more KV to read, and more sequences more of everything: a decode step never gets
    faster, in any mode.

    Exception (roofline and achievable): chunked local attention (Llama 4's C layers). A query attends only
    to the keys of its own chunk of C tokens, so a chunked layer's decode step reads ((S-1) mod C) + 1 keys,
    which drops back to 1 after a chunk boundary. There the law holds one chunk apart: latency(S + C) >=
    latency(S). The simple mode charges the cache a chunked layer keeps (min(S, C) tokens), which never
    shrinks, so it holds there in full."""
    m = MODELS[name]
    mode, hw = data.draw(modes_for(name)), HARDWARE[data.draw(hardware)]
    B, S = np.array(data.draw(batches), float), np.array(data.draw(contexts), float)
    r = evaluate(m, hw, B, S, mode=mode)
    assume(r is not None)
    t = r["latency_s"]
    assert np.all(np.diff(t, axis=0) >= 0), (mode, hw.key)  # along B
    if chunked(m) and mode != "simple":
        later = evaluate(m, hw, B, S + m.attention_chunk, mode=mode)["latency_s"]
        assert np.all(later >= t), (mode, hw.key)
    else:
        assert np.all(np.diff(t, axis=1) >= 0), (mode, hw.key)  # along S


@models
@settings(max_examples=3, deadline=None)
@given(data=st.data())
def test_prefill_latency_never_falls_as_the_prompt_grows(name, data):
    """TTFT is essentially the prefill time, which grows with the prompt (BRIEF): every op's FLOPs and bytes
    are non-decreasing in P, and so is every term the achievable mode adds (tile and wave quantization round
    up, the attention rate's S_k / (S_k + S_1/2) factor multiplies FLOPs that grow faster). All modes."""
    m = MODELS[name]
    mode, hw = data.draw(modes_for(name)), HARDWARE[data.draw(hardware)]
    B = np.array(data.draw(st.lists(st.integers(1, 64), min_size=1, max_size=3, unique=True).map(sorted)), float)
    P = np.array(data.draw(prompts), float)
    r = evaluate(m, hw, B, P, "prefill", mode)
    assume(r is not None)
    assert np.all(np.diff(r["latency_s"], axis=1) >= 0), (mode, hw.key)
    assert np.all(np.diff(r["latency_s"], axis=0) >= 0), (mode, hw.key)


# ---------------------------------------------------------------- throughput, memory and fit
@models
@settings(max_examples=2, deadline=None)
@given(data=st.data())
def test_throughput_is_the_tokens_of_every_replica_over_the_latency(name, data):
    """Throughput = B / step time in decode and B * P / prefill time in prefill, times the replicas (which
    leave latency alone). All modes; the replicas law in every mode too."""
    m = MODELS[name]
    mode, hw = data.draw(modes_for(name)), HARDWARE[data.draw(hardware)]
    n = data.draw(st.integers(2, 8))
    B, S = np.array(data.draw(batches), float), np.array(data.draw(contexts), float)[:4]
    phase = data.draw(st.sampled_from(["decode", "prefill"]))
    S = np.minimum(S, 8192) if phase == "prefill" else S
    one, many = (evaluate(m, hw, B, S, phase, mode, layout=Layout(replicas=r)) for r in (1, n))
    assume(one is not None)
    tokens = B[:, None] * (1.0 if phase == "decode" else S[None, :])
    np.testing.assert_allclose(one["throughput_tok_s"], tokens / one["latency_s"], rtol=1e-15)
    np.testing.assert_array_equal(many["latency_s"], one["latency_s"])
    np.testing.assert_allclose(many["throughput_tok_s"], n * tokens / one["latency_s"], rtol=1e-15)
    assert many["devices"] == n


@models
@settings(max_examples=2, deadline=None)
@given(data=st.data())
def test_a_step_fits_exactly_when_its_memory_is_within_the_capacity_whatever_the_mode(name, data):
    """fits <=> memory_bytes <= memory_capacity, and memory (weights, KV, activations) is a property of the op
    list, not of how its time is priced: the same in the roofline, achievable and simple modes."""
    m = MODELS[name]
    hw = HARDWARE[data.draw(hardware)]
    B, S = np.array(data.draw(batches), float), np.array(data.draw(contexts), float)
    phase = data.draw(st.sampled_from(["decode", "prefill"]))
    S = np.minimum(S, 8192) if phase == "prefill" else S
    runs = [r for r in (evaluate(m, hw, B, S, phase, md) for md in MODES) if r is not None]
    assume(runs)  # a device without the activations' peak (the T4 has no bf16) prices no mode
    for r in runs:
        np.testing.assert_array_equal(r["fits"], r["memory_bytes"] <= hw.memory_capacity)
        for k in ("memory_bytes", "weight_bytes", "kv_cache_bytes", "activation_bytes"):
            np.testing.assert_array_equal(r[k], runs[0][k])
    # a device exactly as big as one point's memory holds that point, and one byte less does not
    need = float(runs[0]["memory_bytes"][0, 0])
    assert evaluate(m, hw.replace(memory_capacity=need), B[:1], S[:1], phase, "simple")["fits"][0, 0]
    assert not evaluate(m, hw.replace(memory_capacity=need - 1), B[:1], S[:1], phase, "simple")["fits"][0, 0]


@models
@settings(max_examples=4, deadline=None)
@given(data=st.data())
def test_max_batch_fits_and_one_more_sequence_does_not_with_any_layout_and_overhead(name, data):
    """`max_batch` (and `budget`) is the largest B whose weights + overhead + KV + activations fit on every
    device of the layout: B = max_batch fits, B = max_batch + 1 does not. With ep the replica's sequences
    are spread over ep device groups, so one more sequence lands on the busiest one; with pp the largest
    stage holds the whole batch's KV for its layers; with tp every device holds its share of the heads.
    Memory does not depend on the time mode (the law above), so the simple mode prices it here; the law is
    about memory and holds in every mode. In a prefill the step's activations (T = S tokens a sequence) count
    as well."""
    m = MODELS[name]
    lay = data.draw(layouts(m))
    phase = data.draw(st.sampled_from(["decode", "prefill"]))
    S = float(data.draw(st.integers(1, 65536 if phase == "decode" else 8192)))
    weights = float(engine.per_sequence(m, S, layout=lay)["weight_bytes"])
    cap = weights * data.draw(st.floats(1.0, 4.0))
    over = (cap - weights) * data.draw(st.sampled_from([0.0, 0.01, 0.3, 0.9]))
    mb = float(engine.max_batch(m, cap, S, overhead=over, layout=lay, phase=phase))
    assert mb == int(mb) >= 0
    hw = HARDWARE["h100-sxm"].replace(memory_capacity=cap)
    mem = engine.evaluate(m, hw, [max(mb, 1.0), mb + 1], S, phase, mode="simple", layout=lay)["memory_bytes"][:, 0]
    if mb >= 1:
        assert mem[0] + over <= cap, (lay, mb)
    assert mem[1] + over > cap, (lay, mb)
    if phase == "prefill":
        return
    b = api.budget(m, memory=cap, overhead=over, context=S, tp=lay.tp, pp=lay.pp, ep=lay.ep)
    assert b["max_batch"][0] == mb
    # the KV tokens one replica holds: each of its ep device groups fills what its weights and overhead leave
    per_token = float(engine.per_sequence(m, S, layout=lay)["kv_bytes_per_seq"]) / S
    free = (cap - over - weights) * lay.ep
    assert b["max_tokens"][0] * per_token <= free * (1 + 1e-12)
    assert (b["max_tokens"][0] + lay.ep) * per_token > free * (1 - 1e-12)


@pytest.mark.parametrize("name", ["llama-3.1-8b", "mixtral-8x7b", "deepseek-v2-lite"])
def test_a_device_exactly_as_big_as_b_sequences_holds_b_of_them_and_one_byte_less_does_not(name):
    """max_batch counts a batch whose memory equals the capacity to the byte as fitting (<=, as `fits` does).
    Exact equality is safe here: in bf16 every term (stored weights, KV, activations) is a whole number of bytes
    far below 2**53, so any order of summing them gives the same float (checked below)."""
    m = MODELS[name]
    hw = HARDWARE["h100-sxm"]
    for B in (1.0, 37.0):
        need = float(engine.evaluate(m, hw, B, 4096.0, mode="simple")["memory_bytes"][0, 0])
        assert need.is_integer() and need < 2**53
        assert engine.max_batch(m, need, 4096.0) == B
        assert engine.max_batch(m, need - 1.0, 4096.0) == B - 1


@models
@settings(max_examples=3, deadline=None)
@given(data=st.data())
def test_the_linear_estimate_of_max_batch_never_overshoots_and_falls_short_by_less_than_ep(name, data):
    """max_batch starts from the linear estimate floor(free / (KV + activations a sequence)) x ep, with the
    per-sequence terms taken at ep sequences (one on each attention group). Memory is linear in B through
    zero but for the busiest group's ceil(B / ep): so the estimate fits, and so does up to ep - 1 more (the
    sequences that land on groups below the busiest one's KV step), never ep more. Every model kind, both
    phases, any layout."""
    m = MODELS[name]
    lay = data.draw(layouts(m))
    phase = data.draw(st.sampled_from(["decode", "prefill"]))
    S = np.array([float(data.draw(st.integers(1, 8192)))])
    ps = engine.per_sequence(m, S, phase=phase, layout=lay)
    cap = float(ps["weight_bytes"]) * data.draw(st.floats(1.0, 4.0))
    est = np.floor((cap - ps["weight_bytes"]) / (ps["kv_bytes_per_seq"] + ps["activation_bytes_per_seq"])) * lay.ep
    mb = engine.max_batch(m, cap, S, phase=phase, layout=lay)
    assert est[0] <= mb[0] <= est[0] + lay.ep - 1, (lay, phase, est, mb)


def test_a_prefill_spread_over_eight_expert_groups_fits_sequences_past_the_linear_estimate():
    """Mixtral 8x7B, a prefill of 2,048 tokens a sequence, ep = 8, on an H200's memory (143,771 MiB, the
    catalog's): the linear estimate is 1,704 sequences (213 a group), but a sequence's activations are a small
    part of what it costs, so 1,708 fit (four groups hold 214) and 1,709 do not. max_batch finds the 1,708."""
    m = MODELS["mixtral-8x7b"]
    lay = Layout(ep=8)
    hw = HARDWARE["h200"]
    S = 2048.0
    mb = float(engine.max_batch(m, hw.memory_capacity, S, phase="prefill", layout=lay))
    ps = engine.per_sequence(m, S, phase="prefill", layout=lay)
    free = hw.memory_capacity - ps["weight_bytes"]
    est = float(np.floor(free / (ps["kv_bytes_per_seq"] + ps["activation_bytes_per_seq"])) * 8)
    assert (est, mb) == (1704, 1708)
    mem = engine.evaluate(m, hw, [est, mb, mb + 1], S, "prefill", mode="simple", layout=lay)["memory_bytes"][:, 0]
    assert mem[0] < mem[1] <= hw.memory_capacity < mem[2]


# ---------------------------------------------------------------- weight formats
def _bits(name: str) -> tuple[float, float]:
    """(least, most) bits a stored weight of this format costs, scales included, over the matrix rows of the
    catalog (per-row scales: rows of 128 to 2**20 weights; a per-tensor scale adds next to nothing)."""
    fm = get_format(name)
    if fm.group is None:
        return fm.bits_per_element(row=2**20), fm.bits_per_element(row=128)
    b = fm.bits_per_element()
    return b, b + fm.tensor_scale_bits / 4096  # a matrix of at least 4096 weights


FORMATS = sorted(known_formats() + ["int4-g64", "int8-g128"], key=lambda n: _bits(n)[0])


@models
def test_a_narrower_weight_format_never_stores_more_weight_bytes(name):
    """Fewer bits per weight, scales included, mean fewer stored bytes (BRIEF, "Quantization"), whatever the
    model: embeddings, LM head and norms stay 16-bit below 16 bits, and a format the model pins for a tensor
    group (gpt-oss's mxfp4 experts) is the same for every precision. Pairs whose bit ranges overlap (equal
    bits, different scale layouts) are not ordered."""
    m = MODELS[name]
    wb = {fm: engine.memory(build_ops(m, 1.0, 1.0, 1.0, "decode", Precision(fm)), m, 1.0, 1.0, Precision(fm))
          ["weight_bytes"] for fm in FORMATS}
    for a in FORMATS:
        for b in FORMATS:
            if _bits(a)[1] < _bits(b)[0]:
                assert wb[a] <= wb[b], (a, b)
    pinned = dict(m.weight_formats)
    groups = {"attention", "experts"} | {g for g, p in (("mlp", "mlp_down"), ("shared_expert", "shared_expert_down"))
                                        if any(op.name.startswith(p) for op in build_ops(m, 1.0, 1.0, 1.0, "decode"))}
    if groups <= set(pinned):  # gpt-oss, Kimi-K2.5: the checkpoint pins every group a precision below 16 bits sets
        assert wb["int4-g128"] == wb["fp8"] == wb["bf16"] <= wb["fp32"]
    else:  # every other model quantizes something
        assert wb["int4-g128"] < wb["fp8"] < wb["bf16"] < wb["fp32"]


# ---------------------------------------------------------------- requests
@models
@settings(max_examples=2, deadline=None)
@given(data=st.data())
def test_a_request_takes_its_prefill_plus_each_of_its_decode_steps(name, data):
    """request time = prefill(P) + sum over g < G of decode(S = P + g), TTFT = the prefill, throughput
    B * G / time, memory the larger of the prefill's and the last step's; however the decode steps are
    chunked. All modes."""
    m = MODELS[name]
    mode, hw = data.draw(modes_for(name)), HARDWARE[data.draw(hardware)]
    B = float(data.draw(st.integers(1, 64)))
    P, G = float(data.draw(st.integers(1, 4096))), data.draw(st.integers(1, 6))
    pre = evaluate(m, hw, B, P, "prefill", mode)
    assume(pre is not None)
    steps = evaluate(m, hw, B, P + np.arange(G), "decode", mode)
    r = engine.request(m, hw, B, P, G, mode, chunk=data.draw(st.integers(1, G)))
    total = pre["latency_s"][0, 0] + steps["latency_s"][0].sum()
    assert r["ttft_s"][0, 0] == pre["latency_s"][0, 0]
    assert r["latency_s"][0, 0] == pytest.approx(total, rel=1e-12)
    assert r["throughput_tok_s"][0, 0] == pytest.approx(B * G / total, rel=1e-12)
    assert r["memory_bytes"][0, 0] == max(pre["memory_bytes"][0, 0], steps["memory_bytes"][0, -1])
    # the request's intensity: the prefill's FLOPs and bytes plus G steps priced as the last one
    f = pre["flops"][0, 0] + G * steps["flops"][0, -1]
    b = pre["bytes"][0, 0] + G * steps["bytes"][0, -1]
    assert r["intensity"][0, 0] == pytest.approx(f / b, rel=1e-12)


# ---------------------------------------------------------------- speculative decoding
@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=2, max_size=20, unique=True).map(sorted), st.integers(1, 32),
       st.floats(0, 2), st.floats(0.5, 8))
def test_speculative_speedup_never_falls_as_the_acceptance_rate_grows(alphas, gamma, c, verify):
    """Each accepted token is free output: expected tokens (1 - a^(g+1)) / (1 - a) and so the speedup grow
    with the acceptance rate a, for any gamma, draft cost and verification cost; and so does the speedup at
    the best gamma."""
    a = np.array(alphas)
    e = whatif.expected_tokens(a, gamma)
    s = whatif.speedup(a, gamma, c, verify)
    assert np.all(np.diff(e) >= -1e-12) and np.all(np.diff(s) >= -1e-12 * s.max())
    _, best = whatif.best_gamma(a, c)
    assert np.all(np.diff(best) >= -1e-12 * best.max())


@settings(max_examples=8, deadline=None)
@given(st.sampled_from(MODEL_NAMES), st.sampled_from(MODEL_NAMES), st.sampled_from(["roofline", "achievable"]),
       st.integers(1, 256), st.integers(16, 32768))
def test_speculative_speedup_from_the_engine_never_falls_as_the_acceptance_rate_grows(draft, target, mode, B, S):
    """The same law with draft and target step costs from the op list (roofline and achievable; the simple
    mode has no per-token verification cost and is not offered for speculative decoding)."""
    assume(mode != "achievable" or (achievable_anywhere(draft) and achievable_anywhere(target)))
    hw = HARDWARE["h100-sxm"] if mode == "roofline" else HARDWARE["b200"]
    try:
        t = whatif.speculative(alpha=[0.0, 0.3, 0.6, 0.8, 0.95, 1.0], gamma=[1, 3, 8], draft=draft, target=target,
                               hardware=hw, batch=B, context=S, mode=mode)
    except SpecError as e:
        assume("missing" not in str(e))
        raise
    sp = np.asarray(t["speedup"], float).reshape(6, 3)  # alpha x gamma
    assert np.all(np.diff(sp, axis=0) >= 0)


# ---------------------------------------------------------------- the weights bound
def _must_read(m, B, T, S, phase, lay):
    """Weight bytes one device must read in a step of its largest stage: its stored weights, less the rows
    of the embedding tables a lookup skips (an untied table and learned positions) and the experts no
    token routes to, E * (1 - k/E)^tokens of them in expectation under uniform routing (docs/derivations.md,
    "MoE"); tokens are one micro-batch's when a pipeline splits the batch."""
    ops = build_ops(m, B, T, S, phase, layout=lay, stage=True)
    stored = sum(float(np.max(o.w_stored)) * o.count for o in ops)
    skip = sum(float(np.max(o.w_stored)) * o.count for o in ops
               if (o.name == "embed" and not m.tied_embeddings) or o.name == "pos_embed")
    if m.moe:
        e = m.moe
        tokens = B * T if (lay.pp == 1 or phase == "prefill") else B / min(lay.m, B)
        miss = (1 - e.n_active / e.n_experts) ** tokens
        experts = sum(float(np.max(o.w_stored)) * o.count for o in ops if o.name.startswith("expert_"))
        skip += experts * miss
    return stored, stored - skip


@models
@settings(max_examples=3, deadline=None)
@given(data=st.data())
def test_a_step_takes_at_least_the_weights_it_must_read_over_the_bandwidth_on_every_device(name, data):
    """A step cannot beat streaming its weights from HBM: latency >= weight bytes read / bandwidth, per device
    of a layout (its shard under tp, its experts under ep, its largest stage under pp). Roofline: every op
    takes at least its bytes / bandwidth. Achievable: never below the roofline (per op), so the same bound.
    Simple: streams every stored weight, latency >= weight_bytes / bandwidth outright (the embedding rows
    and untouched experts included)."""
    m = MODELS[name]
    mode, hw = data.draw(modes_for(name)), HARDWARE[data.draw(hardware)]
    lay = data.draw(layouts(m))
    phase = data.draw(st.sampled_from(["decode", "prefill"]))
    B = float(data.draw(st.integers(1, 512)))
    S = float(data.draw(st.integers(1, 32768 if phase == "decode" else 4096)))
    T = 1.0 if phase == "decode" else S
    r = evaluate(m, hw, B, S, phase, mode, layout=lay)
    assume(r is not None)
    stored, need = _must_read(m, B, T, S, phase, lay)
    t = float(r["latency_s"][0, 0])
    assert float(r["weight_bytes"][0, 0]) == pytest.approx(stored, rel=1e-12)
    assert t >= need / hw.memory_bandwidth * (1 - 1e-12), (mode, hw.key, lay)
    if mode == "simple":
        assert t >= stored / hw.memory_bandwidth * (1 - 1e-12)


# ---------------------------------------------------------------- communication
@models
@settings(max_examples=2, deadline=None)
@given(data=st.data())
def test_the_communication_time_is_what_the_collectives_add_to_the_step(name, data):
    """Collectives are ops of the op list (docs/parallelism.md), so in the roofline mode, where the step is
    the sum of its op times, comm_time_s is the step less the same op list without its collectives: zero on
    one device, and the all-reduces of every layer under tp, the all-to-alls of every MoE layer under ep.
    (Achievable: the step is max(device, host) + overhead, not a sum; simple: no communication term.)"""
    m = MODELS[name]
    hw = HARDWARE[data.draw(hardware)]
    lay = data.draw(layouts(m, pp=False))
    phase = data.draw(st.sampled_from(["decode", "prefill"]))
    B, S = float(data.draw(st.integers(1, 256))), float(data.draw(st.integers(1, 8192)))
    r = evaluate(m, hw, B, S, phase, "roofline", layout=lay)
    assume(r is not None)
    ops = build_ops(m, B, 1.0 if phase == "decode" else S, S, phase, layout=lay)
    rest = engine.roofline([o for o in ops if o.kind != COMM], hw, Precision(), layout=lay)["time"]
    t, comm = float(r["latency_s"][0, 0]), float(r["comm_time_s"][0, 0])
    assert comm == pytest.approx(t - float(rest), rel=1e-9, abs=1e-12 * t)
    if lay.tp == lay.ep == 1:
        assert comm == 0
    else:
        assert comm > 0


# ---------------------------------------------------------------- trivial layouts
@models
@settings(max_examples=2, deadline=None)
@given(data=st.data())
def test_one_stage_and_one_expert_group_are_no_layout_at_all_bit_for_bit(name, data):
    """pp = 1 and ep = 1 (with any micro-batch count, which only a pipeline uses) and one replica give exactly
    the single-device answer: every column, to the last bit, in every mode and phase; and so do max_batch
    and a whole request."""
    m = MODELS[name]
    mode, hw = data.draw(modes_for(name)), HARDWARE[data.draw(hardware)]
    phase = data.draw(st.sampled_from(["decode", "prefill"]))
    B, S = np.array(data.draw(batches), float), np.array(data.draw(contexts), float)[:3]
    S = np.minimum(S, 4096) if phase == "prefill" else S
    trivial = Layout(tp=1, pp=1, ep=1, replicas=1, microbatches=data.draw(st.integers(1, 8)))
    a = evaluate(m, hw, B, S, phase, mode)
    assume(a is not None)
    b = evaluate(m, hw, B, S, phase, mode, layout=trivial)
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    assert np.all(b["comm_time_s"] == 0)
    np.testing.assert_array_equal(engine.max_batch(m, hw.memory_capacity, S),
                                  engine.max_batch(m, hw.memory_capacity, S, layout=trivial))
    ra = engine.request(m, hw, B[:1], S[:1], 2, mode)
    rb = engine.request(m, hw, B[:1], S[:1], 2, mode, layout=trivial)
    for k in ("latency_s", "ttft_s", "throughput_tok_s", "memory_bytes"):
        np.testing.assert_array_equal(ra[k], rb[k], err_msg=k)


@pytest.mark.parametrize("name", MODEL_NAMES)
@pytest.mark.parametrize("phase", ["decode", "prefill"])
def test_the_summation_keys_only_group_the_sum_any_grouping_gives_the_same_totals(name, phase):
    """engine._keys_for groups an op list's terms by the axes (B, S) they vary along, so that a point and the same
    point inside a grid add in one order. Any grouping is the same sum: the probe's keys, one group for all
    (keys None) and a group per op agree to rounding on every total (why the keys' lines are marked equivalent)."""
    m, hw = MODELS[name], HARDWARE["h100-sxm"]
    prec = Precision()
    B, S = np.array([[1.0], [8.0], [64.0]]), np.array([[128.0, 4096.0]])
    T = 1.0 if phase == "decode" else S
    ops = build_ops(m, B, T, S, phase, prec)
    keys = engine._keys_for(m, phase, prec, "fused", True, ops)
    assert len(keys) == len(ops) and set(keys) <= {(), (0,), (1,), (0, 1)}
    probe = engine.roofline(ops, hw, prec, keys)
    for other in (None, tuple((i,) for i in range(len(ops)))):
        got = engine.roofline(ops, hw, prec, other)
        for k in ("time", "flops", "bytes"):
            np.testing.assert_allclose(got[k], probe[k], rtol=1e-12, atol=0)


MOE_NAMES = [n for n in MODEL_NAMES if MODELS[n].moe]


@pytest.mark.parametrize("name", MOE_NAMES)
@settings(max_examples=6, deadline=None)
@given(data=st.data())
def test_redundant_expert_slots_add_only_their_copies_weights_to_each_device(name, data):
    """R redundant slots over ep groups (expert-parallel load balancing) leave (E + R) / ep experts on each device:
    the routed experts' stored weights grow by exactly (E + R) / E, every other op's weights, all FLOPs and the KV
    cache stay as they were, the token-expert pairs stay k/ep of the tokens', and the roofline step is no faster.
    For every MoE model of the catalog, at an ep and R that divide, in both phases."""
    m = MODELS[name]
    E = m.moe.n_experts
    ep = data.draw(st.sampled_from([d for d in (2, 4, 8, 16, 32) if E % d == 0] or [E]), label="ep")
    R = data.draw(st.sampled_from([ep, 2 * ep, 4 * ep]), label="R")
    phase = data.draw(st.sampled_from(["decode", "prefill"]), label="phase")
    B, T = (64.0, 1.0) if phase == "decode" else (1.0, 256.0)
    a = build_ops(m, B, T, 1024.0, phase, layout=Layout(ep=ep))
    b = build_ops(m, B, T, 1024.0, phase, layout=Layout(ep=ep, redundant_experts=R))
    assert [o.name for o in a] == [o.name for o in b]
    for x, y in zip(a, b):
        np.testing.assert_allclose(np.asarray(y.flops, float), np.asarray(x.flops, float), rtol=1e-12)
        if x.name.startswith("expert_"):
            assert float(y.w_stored) == pytest.approx(float(x.w_stored) * (E + R) / E, rel=1e-12)
            for k in ("act_read", "act_write"):  # the same token-expert pairs a device
                np.testing.assert_allclose(np.asarray(getattr(y, k), float), np.asarray(getattr(x, k), float),
                                           rtol=1e-12)
        else:
            assert float(y.w_stored) == float(x.w_stored)
            np.testing.assert_allclose(np.asarray(y.kv_read, float), np.asarray(x.kv_read, float), rtol=1e-12)
    hw = HARDWARE["h100-sxm"]
    ta = engine.evaluate(m, hw, [B], [1024.0], layout=Layout(ep=ep), phase=phase)["latency_s"]
    tb = engine.evaluate(m, hw, [B], [1024.0], layout=Layout(ep=ep, redundant_experts=R), phase=phase)["latency_s"]
    assert np.all(tb >= ta * (1 - 1e-12))


@pytest.mark.parametrize("name", MOE_NAMES)
def test_the_achievable_step_is_never_faster_than_the_roofline_with_experts_across_nodes(name):
    """Expert parallelism over 16 or 32 GPUs of HGX nodes (8 a node): every engine's profile prices the step at
    least at the roofline, whose all-to-all sends a token once to each remote node its experts live on, and whose
    measured NVLink kernels do not reach across nodes. Both phases."""
    m = MODELS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        for hw_name in ("b200", "h100-sxm"):
            hw = HARDWARE[hw_name]
            for ep in (d for d in (16, 32) if m.moe.n_experts % d == 0):
                for phase, B, S in (("prefill", 1, 4096), ("decode", 64, 4096)):
                    r = engine.evaluate(m, hw, [B], [S], layout=Layout(ep=ep), phase=phase)["latency_s"]
                    for impl in ("vllm-0.24", "sglang-0.5", "trtllm-1.3", "graphs"):
                        a = engine.evaluate(m, hw, [B], [S], layout=Layout(ep=ep), phase=phase, mode="achievable",
                                            impl=load_impl(impl))["latency_s"]
                        assert float(np.ravel(a)[0]) >= float(np.ravel(r)[0]) * (1 - 1e-9), (hw_name, ep, phase, impl)
