"""The serving simulator: conservation, causality, the batching law, KV memory laws, traces, the CLI."""
import csv
import json
import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st


from perfmodel import engine
from perfmodel.cli import main
from perfmodel.errors import SpecError
from perfmodel.serving.kvmemory import Group, Paged, kv_sizes
from perfmodel.ops import Precision
from perfmodel.serving import StepCost, Traffic, make_traffic, parse_lengths, serve_runs, simulate
from perfmodel.specs import load_hardware, load_model

M, HW = load_model("llama-2-13b"), load_hardware("h100-sxm")
PREC = Precision()
COST = StepCost(M, HW, PREC, 16)  # shared cache; step times do not depend on the memory capacity
SIZES = kv_sizes(M, HW, PREC)


def tight(tokens: int):
    """The H100 with room for only `tokens` tokens of KV after the weights."""
    return HW.replace(memory_capacity=SIZES.weights + tokens * SIZES.per_token)


def traffic(reqs, samples=1, prefix=0, at0=False):
    """reqs: (gap to the previous arrival s, prompt tokens, output tokens of each sample)."""
    arr = np.cumsum([0.0] + [r[0] for r in reqs[1:]]) * (not at0)
    out = np.array([list(r[2])[:samples] for r in reqs])
    names = [f"r{i}" for i in range(len(reqs))]
    return Traffic(arr, np.array([r[1] for r in reqs]), out, int(out.max()), prefix, names)


requests_st = st.lists(st.tuples(st.floats(0, 0.3), st.integers(1, 600), st.lists(st.integers(1, 60), min_size=3,
                                                                                     max_size=3)),
                       min_size=1, max_size=24)
config_st = st.fixed_dictionaries({
    "policy": st.sampled_from(["static", "continuous"]), "kv_manager": st.sampled_from(["paged", "contiguous"]),
    "sharing": st.booleans(), "prefill": st.sampled_from(["chunked", "separate", "whole"]),
    "token_budget": st.sampled_from([None, 64, 700]), "block_size": st.sampled_from([1, 16, 32]),
    "slots": st.sampled_from([None, 3, 8])})


def check_run(r, tr):
    q, tl = r.requests, r.timeline
    # conservation: every request completes exactly once, and the tokens made are the tokens asked for
    assert np.all(q["completions"] == 1)
    assert r.summary["tokens"] == tl["generated"].sum() == tr.outputs.sum() == q["output_tokens"].sum()
    # causality: nothing happens before it arrives, and no latency is negative
    assert np.all(q["ttft_s"] > 0) and np.all(q["latency_s"] >= q["ttft_s"])
    assert np.all(q["last_token_s"] >= q["first_token_s"]) and np.all(q["done_s"] >= q["last_token_s"])
    assert np.all(np.isnan(q["tpot_s"]) | (q["tpot_s"] >= 0))
    # every iteration takes time, and they do not overlap
    assert np.all(tl["duration_s"] > 0) and np.all(np.diff(tl["t_start_s"]) >= tl["duration_s"][:-1] * (1 - 1e-12))
    # KV memory: what is held fits in what is reserved, which fits in what is left after the weights
    cap = r.summary["kv_capacity_bytes"]
    assert np.all(tl["kv_used_bytes"] <= tl["kv_reserved_bytes"] * (1 + 1e-12))
    assert np.all(tl["kv_reserved_bytes"] <= cap * (1 + 1e-12))
    for part in ("kv_internal_bytes", "kv_future_bytes", "kv_external_bytes", "kv_saved_bytes"):
        assert np.all(tl[part] >= -1e-6 * cap)
    if r.summary["slots"] != np.inf:
        assert np.all(tl["slots_used"] <= r.summary["slots"])


@given(requests_st, st.integers(1, 3), st.integers(0, 40), st.booleans(), config_st, st.sampled_from([None, 900]))
def test_every_request_finishes_once_with_its_tokens_and_no_negative_latency(reqs, n, prefix, at0, cfg, room):
    tr = traffic(reqs, n, prefix, at0)
    hw = HW if room is None else tight(room * n + 700)  # room: memory tight enough to force preemptions
    if cfg["slots"] is not None and n > cfg["slots"]:
        cfg = dict(cfg, slots=n)
    check_run(simulate(M, hw, tr, prec=PREC, cost=COST, **cfg), tr)


@given(requests_st, st.integers(1, 8), st.integers(1, 2), st.booleans(), st.sampled_from(["paged", "contiguous"]))
def test_continuous_batching_never_loses_to_static_batching_on_throughput(reqs, slots, n, at0, kv):
    """Same trace, same slots, memory not the limit, prompts joining the step whole (Orca)."""
    tr = traffic(reqs, n, 0, at0)
    slots = max(slots, n)
    s = simulate(M, HW, tr, "static", slots, prec=PREC, cost=COST).summary
    c = simulate(M, HW, tr, "continuous", slots, kv, prec=PREC, cost=COST).summary
    assert c["throughput_tok_s"] >= s["throughput_tok_s"] * (1 - 1e-12)


def test_prefill_only_iterations_can_cost_continuous_batching_its_lead():
    """The law needs prompts to ride in decode steps: with separate prefill iterations, short staggered
    outputs make every arrival stall the decodes, and static batching comes out ahead."""
    tr = traffic([(0.0, 64, [o]) for o in [2, 3] * 10], at0=True)
    s = simulate(M, HW, tr, "static", 2, prec=PREC, cost=COST).summary
    sep = simulate(M, HW, tr, "continuous", 2, prefill="separate", prec=PREC, cost=COST).summary
    orca = simulate(M, HW, tr, "continuous", 2, prefill="chunked", prec=PREC, cost=COST).summary
    assert sep["throughput_tok_s"] < s["throughput_tok_s"] < orca["throughput_tok_s"]


def test_the_story_continuous_batching_wins_throughput_and_latency():
    """64 requests, 8 slots, skewed outputs (median 18, up to 231), one H100."""
    for rate, factor in ((None, 2), (20, 4)):
        s, c = (r.summary for r in serve_runs("llama-2-13b", "h100-sxm", "both", 64, 8, rate,
                                              output_len="lognormal:median=18,max=231"))
        assert c["throughput_tok_s"] > s["throughput_tok_s"]
        assert s["mean_latency_s"] > factor * c["mean_latency_s"]


def test_static_requests_return_when_their_batch_ends():
    tr = traffic([(0.0, 100, [o]) for o in (1, 5, 30, 2)], at0=True)
    q = simulate(M, HW, tr, "static", 2, prec=PREC, cost=COST).requests
    assert q["done_s"][0] == q["done_s"][1] < q["done_s"][2] == q["done_s"][3]
    assert q["last_token_s"][0] < q["done_s"][0]  # its own tokens were done earlier


@given(requests_st, st.integers(1, 3), st.integers(0, 100), st.sampled_from([1, 7, 16, 64]), st.booleans())
def test_paged_internal_fragmentation_stays_below_one_block_per_sequence(reqs, n, prefix, block, share):
    tr = traffic(reqs, n, prefix)
    r = simulate(M, tight(3000 * n), tr, "continuous", None, "paged", block, share, prec=PREC, cost=COST)
    tl = r.timeline
    block_bytes = block * SIZES.per_token
    assert np.all(tl["kv_internal_bytes"] < np.maximum(tl["running"], 1) * block_bytes)
    assert np.all(tl["kv_external_bytes"] == 0)


def _group(rid, prompt, outs, known):
    g = Group(rid, prompt, outs)
    if known:  # forked, each sample holding prompt + some generated tokens
        g.fork()
        for s, k in zip(g.seqs, known):
            s.known = prompt + k
    return g


@given(st.lists(st.tuples(st.integers(1, 300), st.lists(st.integers(1, 50), min_size=1, max_size=4), st.booleans()),
                min_size=1, max_size=12), st.integers(0, 100), st.sampled_from([1, 16, 32]))
def test_sharing_never_increases_memory_and_saves_exactly_what_it_reports(groups, prefix, block):
    """The same groups in the same states, with and without sharing: the shared cache is never larger,
    and the difference is the `saved` it reports."""
    shared, private = Paged(SIZES, block, True, prefix), Paged(SIZES, block, False, prefix)
    for i, (p, outs, forked) in enumerate(groups):
        for mgr in (shared, private):
            g = _group(i, prefix + p, outs, [1 + (7 * i + j) % 40 for j in range(len(outs))] if forked else None)
            assert mgr.admit(g) and mgr.update(g)
        used_s, res_s, _, _, _, saved = shared.snapshot()
        used_p, res_p, _, _, _, saved_p = private.snapshot()
        assert res_s <= res_p and used_s <= used_p and saved_p == 0
        assert res_p - res_s == pytest.approx(saved, rel=1e-12, abs=1e-6)


def test_sharing_a_system_prompt_buys_concurrency_and_throughput_when_memory_is_the_limit():
    tr = make_traffic(96, prompt_len=32, output_len="lognormal:median=64,max=256", shared_prefix=1024)
    hw = tight(40_000)
    runs = {share: simulate(M, hw, tr, "continuous", None, "paged", 16, share, prec=PREC, cost=COST).summary
            for share in (False, True)}
    assert runs[True]["peak_running"] > runs[False]["peak_running"]
    assert runs[True]["throughput_tok_s"] > runs[False]["throughput_tok_s"]
    assert runs[True]["mean_kv_saved_bytes"] > 0 == runs[False]["mean_kv_saved_bytes"]


def test_paging_fits_more_sequences_and_serves_more_when_memory_is_the_limit():
    tr = make_traffic(256, prompt_len=128, output_len="lognormal:median=256,max=2048")
    c = simulate(M, HW, tr, "continuous", None, "contiguous", prec=PREC, cost=COST).summary
    p = simulate(M, HW, tr, "continuous", None, "paged", prec=PREC, cost=COST).summary
    assert p["peak_running"] > c["peak_running"] and p["throughput_tok_s"] > c["throughput_tok_s"]
    assert c["mean_kv_internal_bytes"] > p["mean_kv_internal_bytes"]


def step(rows):
    return engine.mixed_step(M, HW, [t for t, _ in rows], [s for _, s in rows], PREC)["latency_s"]


@given(st.lists(st.tuples(st.sampled_from([1, 1, 1, 7, 300]), st.integers(1, 3000)), min_size=1, max_size=12),
       st.integers(1, 64))
def test_step_cost_is_mixed_step_and_quantizing_charges_at_most_q_minus_1_more_tokens(rows, q):
    rows = [(t, max(s, t)) for t, s in rows]
    assert StepCost(M, HW, PREC, 1)(rows) == step(rows)
    padded = [(t, s + (q - 1) * (t == 1)) for t, s in rows]
    assert step(rows) <= StepCost(M, HW, PREC, q)(rows) <= step(padded)


_KINDS = {}


def _kind(name, mode):
    """(model, device, layout, one warm incremental step cost shared by the examples) per catalog model."""
    from perfmodel.ops import Layout
    from perfmodel.serving.stepcost import MixedStep

    if (name, mode) not in _KINDS:
        m = load_model(name)
        hw = load_hardware("b200" if m.moe and m.moe.n_experts >= 128 else "h100-sxm")
        lay = Layout(1, 1, 2, 1) if m.moe and m.moe.n_experts % 2 == 0 else Layout()
        tm = engine.time_model(mode, hw)
        _KINDS[(name, mode)] = (m, hw, lay, tm, MixedStep(m, hw, PREC, lay, tm))
    return _KINDS[(name, mode)]


@pytest.mark.parametrize("mode", ["roofline", "achievable"])
@pytest.mark.parametrize("name", __import__("perfmodel").catalog_names("models"))
@settings(max_examples=10, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from([1, 1, 1, 1, 5, 64, 512]), st.integers(1, 6000)), min_size=1,
                     max_size=40))
def test_the_incremental_step_cost_is_mixed_step_to_the_last_bit_for_every_model_kind(name, mode, rows):
    """stepcost.MixedStep (cached weight-op prefix, per-row attention terms) equals engine.mixed_step exactly,
    for MHA, GQA, MQA, MLA, CLA, windows, chunked, hybrid, linear and MoE models, with ep=2 for MoE."""
    import warnings

    m, hw, lay, tm, fast = _kind(name, mode)
    rows = sorted((t, max(s, t)) for t, s in rows)
    a = np.array(rows, dtype=float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = engine.mixed_step(m, hw, a[:, 0], a[:, 1], PREC, layout=lay, tm=tm)["latency_s"]
        assert fast(tuple(rows)) == want


def test_the_step_cost_depends_on_the_batch_composition():
    c = StepCost(M, HW, PREC, 1)
    assert c([(1, 100)] * 8) < c([(1, 2000)] * 8) < c([(1, 2000)] * 7 + [(512, 512)])


def test_lengths_distributions_respect_their_parameters():
    rng = np.random.default_rng(0)
    x = parse_lengths("lognormal:median=18,max=231", "--output-len").draw(rng, 100_001)
    assert x.min() >= 1 and x.max() == 231 and np.median(x) == 18
    u = parse_lengths("uniform:5,9", "o").draw(rng, 1000)
    assert set(u) == {5, 6, 7, 8, 9}
    assert set(parse_lengths("fixed:7", "o").draw(rng, 5)) == {7} and parse_lengths("7", "o").max == 7


@pytest.mark.parametrize("spec", ["lognormal:median=18", "uniform:9,5", "fixed:0", "poisson:3",
                                  "lognormal:mean=3,max=9", "12.5", "uniform:1,2,3"])
def test_bad_length_specs_are_one_line_errors(spec):
    with pytest.raises(SpecError, match="--output-len"):
        parse_lengths(spec, "--output-len")


def test_same_seed_same_traffic_other_seed_other_traffic():
    a, b, c = (make_traffic(50, rate=3.0, output_len="uniform:1,100", seed=s) for s in (1, 1, 2))
    assert np.array_equal(a.arrival, b.arrival) and np.array_equal(a.outputs, b.outputs)
    assert not np.array_equal(a.arrival, c.arrival) and not np.array_equal(a.outputs, c.outputs)
    d = make_traffic(50, rate=3.0, output_len="fixed:9", seed=1)  # lengths change, arrivals do not
    assert np.array_equal(a.arrival, d.arrival)


def write_trace(path, rows, header=("arrival_s", "prompt_tokens", "output_tokens")):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return str(path)


def test_a_trace_drives_the_simulation(tmp_path, capsys):
    path = write_trace(tmp_path / "t.csv", [(0.2, 300, 5), (0.0, 100, 40), (0.1, 50, 1)])
    assert main(["serve-sim", "--trace", path, "--policy", "continuous", "--format", "json"]) == 0
    (r,) = json.loads(capsys.readouterr().out)
    assert r["requests"] == 3 and r["tokens"] == 46


@pytest.mark.parametrize("rows, where", [
    ([(0, 10, 5), (0.5, 10, "x")], "row 3, column output_tokens"),
    ([(0, 10, 5), (-1, 10, 5)], "row 3, column arrival_s"),
    ([(0, 2.5, 5)], "row 2, column prompt_tokens"),
    ([(0, 10)], "row 2: expected 3 fields"),
])
def test_trace_errors_name_the_file_row_and_column(tmp_path, capsys, rows, where):
    path = write_trace(tmp_path / "bad.csv", rows)
    assert main(["serve-sim", "--trace", path]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("perfmodel: error: ") and f"{path}: {where}" in err


def test_a_trace_without_the_columns_is_refused(tmp_path, capsys):
    path = write_trace(tmp_path / "h.csv", [(0, 1, 1)], header=("time", "prompt_tokens", "output_tokens"))
    assert main(["serve-sim", "--trace", path]) == 2
    assert f"{path}: row 1: header lacks column arrival_s" in capsys.readouterr().err


def test_serve_sim_json_contract_and_timeline_csv(tmp_path, capsys):
    out = tmp_path / "tl.csv"
    assert main(["serve-sim", "--requests", "12", "--slots", "4", "--timeline", str(out), "--format", "json"]) == 0
    recs = json.loads(capsys.readouterr().out)
    keys = {"policy", "requests", "throughput_tok_s", "mean_latency_s", "p50_latency_s", "p99_latency_s",
            "mean_ttft_s", "mean_tpot_s"}
    assert [r["policy"] for r in recs] == ["static", "continuous"] and all(keys <= set(r) for r in recs)
    with open(out) as f:
        tl = list(csv.DictReader(f))
    assert {r["policy"] for r in tl} == {"static", "continuous"}
    assert sum(int(r["generated"]) for r in tl) == sum(r["tokens"] for r in recs)
    assert max(int(r["slots_used"]) for r in tl) <= 4


def test_kv_memory_report_compares_the_managers(capsys):
    assert main(["kv-memory", "--requests", "64", "--shared-prefix", "256", "--block-size", "16,32",
                 "--format", "json"]) == 0
    recs = json.loads(capsys.readouterr().out)
    assert [(r["manager"], r["block_size"]) for r in recs] == [
        ("contiguous", None), ("paged", 16), ("paged+shared", 16), ("paged", 32), ("paged+shared", 32)]
    cont, paged, shared = recs[:3]
    assert paged["mean_future_bytes"] == 0 == paged["mean_external_bytes"]
    assert cont["utilization"] < paged["utilization"]
    assert shared["mean_saved_bytes"] > 0


@pytest.mark.parametrize("argv, msg", [
    (["--policy", "dynamic"], "--policy"), (["--kv-manager", "buddy"], "--kv-manager"),
    (["--rate", "-1"], "--rate"), (["--samples", "9"], "--samples"), (["--slots", "0"], "--slots"),
    (["--prompt-len", "4000", "--output-len", "200"], "max_context"), (["--set", "memory_capacity=20GB"], "weights"),
    (["-m", "llama-2-13b,llama-2-7b"], "one model"), (["--rate", "2", "--trace", "x.csv"], "--rate"),
])
def test_bad_serving_options_are_one_line_errors(capsys, argv, msg):
    assert main(["serve-sim", "--requests", "4", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and msg in err


def test_serving_takes_a_layout_costed_by_the_same_collectives():
    from perfmodel import serving

    base = dict(requests=16, slots=4, output_len="lognormal:median=8,max=64", seed=1)
    one = serving.serve_runs("llama-2-13b", "h100-sxm", "continuous", **base)[0].summary
    same = serving.serve_runs("llama-2-13b", "h100-sxm", "continuous", tp=1, **base)[0].summary
    assert one["throughput_tok_s"] == same["throughput_tok_s"]
    tp4 = serving.serve_runs("llama-2-13b", "h100-sxm", "continuous", tp=4, **base)[0].summary
    assert tp4["devices"] == 4 and tp4["mean_tpot_s"] < one["mean_tpot_s"]  # four devices' bandwidth
    two = serving.serve_runs("llama-2-13b", "h100-sxm", "continuous", replicas=2, **{**base, "requests": 32})
    assert two[0].summary["throughput_tok_s"] == pytest.approx(2 * one["throughput_tok_s"])  # 16 each


def test_serving_refuses_pipelines_in_one_line(capsys):
    from perfmodel.cli import main

    assert main(["serve-sim", "--requests", "8", "--pp", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--pp" in err[0]


@pytest.mark.parametrize("prompt, budget, per_step", [(400, 512, 1), (200, 512, 2), (2, 512, 4)])
def test_separate_prefill_steps_hold_as_many_whole_prompts_as_the_token_budget_allows(prompt, budget, per_step):
    """Four prompts arriving together: each separate prefill iteration takes whole prompts while they fit in
    the budget, so first tokens come in groups of `per_step`, one group per prefill iteration."""
    tr = make_traffic(requests=4, prompt_len=str(prompt), output_len="8")
    r = simulate(M, HW, tr, "continuous", 8, prefill="separate", token_budget=budget, prec=PREC, cost=COST)
    first = np.asarray(r.requests["first_token_s"])
    assert len(np.unique(first)) == 4 // per_step
    assert np.all(np.unique(first, return_counts=True)[1] == per_step)


@pytest.mark.parametrize("prompts, budget, groups", [((300, 300, 300, 300), 700, (2, 2)), ((300, 300, 300, 300), 1200, (4,)),
                                                     ((300, 500, 100, 100), 700, (1, 2, 1))])
def test_whole_prefill_takes_whole_prompts_in_order_up_to_the_first_that_does_not_fit(prompts, budget, groups):
    """TensorRT-LLM without chunked prefill: an iteration carries every decode plus whole prompts, first come first
    served, and stops at the first prompt that does not fit what the decodes leave of the budget (a later, shorter
    one does not jump it). Prompts arriving together get their first tokens in groups, one group an iteration:
    300+300 fit 700, the next 300 does not; 300 then 500 stops at 500 (800 > 700) even though 100 would fit, and the
    next iteration's decode leaves 699: 500 + 100 fit, the last 100 does not."""
    tr = traffic([(0.0, p, (8, 8, 8)) for p in prompts], at0=True)
    r = simulate(M, HW, tr, "continuous", 8, prefill="whole", token_budget=budget, prec=PREC, cost=COST)
    first = np.asarray(r.requests["first_token_s"])
    t, counts = np.unique(first, return_counts=True)
    assert tuple(counts) == groups
    assert np.all(np.diff(first) >= 0)  # in arrival order
    tl = r.timeline  # no prompt is split: each iteration's prompt tokens are a sum of whole prompts
    sums = {0} | {sum(prompts[i:j]) for i in range(len(prompts)) for j in range(i + 1, len(prompts) + 1)}
    assert set(np.asarray(tl["prefill_tokens"]).tolist()) <= sums


def test_whole_prefill_runs_a_prompt_over_the_budget_only_on_an_idle_engine():
    """A prompt longer than the token budget cannot share an iteration (no chunking): it waits until no request
    decodes, then runs whole in an iteration of its own, where chunked prefill would start it at once in chunks."""
    tr = traffic([(0.0, 100, (40, 40, 40)), (0.001, 900, (4, 4, 4))])
    whole = simulate(M, HW, tr, "continuous", 8, prefill="whole", token_budget=512, prec=PREC, cost=COST).requests
    chunk = simulate(M, HW, tr, "continuous", 8, prefill="chunked", token_budget=512, prec=PREC, cost=COST).requests
    assert whole["first_token_s"][1] > whole["last_token_s"][0]  # after the other's last token
    assert chunk["first_token_s"][1] < chunk["last_token_s"][0]  # chunked: while it decodes


@pytest.mark.parametrize("impl, expect", [("trtllm-1.3", "whole"), ("sglang-0.5", "separate"), ("vllm-0.24", "chunked"),
                                          (None, "chunked")])
def test_serve_sim_batches_prompts_as_the_profiles_engine_does_unless_told(impl, expect):
    """--prefill defaults to the --impl engine's own rule (scheduler.ENGINE_PREFILL); an explicit value wins."""
    from perfmodel.serving.api import serve_runs

    kw = dict(model="llama-3.1-8b", hardware="h100-sxm", policy="continuous", requests=16, rate=5.0, slots=8,
              token_budget=1024, prompt_len="uniform:100,800", output_len="16",
              mode="achievable" if impl else "roofline", impl=impl)
    assert serve_runs(**kw)[0].summary["prefill"] == f"{expect}/1024"
    assert serve_runs(**kw, prefill="chunked")[0].summary["prefill"] == "chunked/1024"


def test_whole_prompts_longer_than_the_token_budget_are_refused_as_the_engine_refuses_them(capsys):
    """TensorRT-LLM without chunked prefill rejects a prompt over max_num_tokens (NVIDIA/TensorRT-LLM#9277): so does
    whole-prompt batching, in one line naming --token-budget, from the CLI and from Python; chunked runs it."""
    from perfmodel.cli import main
    from perfmodel.serving.api import serve_runs

    argv = ["serve-sim", "--requests", "8", "--prompt-len", "600", "--output-len", "4", "--token-budget", "512",
            "--policy", "continuous"]
    assert main(argv + ["--prefill", "whole"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--token-budget" in err[0] and "600-token prompt" in err[0]
    assert main(argv + ["--prefill", "chunked"]) == 0
    with pytest.raises(SpecError, match="--token-budget"):
        serve_runs(requests=8, prompt_len=600, output_len=4, token_budget=512, policy="continuous",
                   mode="achievable", impl="trtllm-1.3")


def test_serve_sim_refuses_an_unknown_prefill_rule_in_one_line(capsys):
    from perfmodel.cli import main

    assert main(["serve-sim", "--requests", "8", "--prefill", "mixed"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--prefill" in err[0] and "whole" in err[0]


@pytest.mark.parametrize("kw", [
    dict(model="llama-2-13b", hardware="l40s", requests=300, rate=12.0, slots=None, token_budget=512,
         prompt_len="lognormal:median=600,max=2500", output_len="lognormal:median=200,max=1500"),  # preemptions
    dict(model="llama-3.1-8b", hardware="h100-sxm", requests=400, rate=30.0, slots=16, prefill="separate",
         token_budget=4096, prompt_len="uniform:16,900", output_len="lognormal:median=40,max=400"),
    dict(model="qwen3-30b-a3b", hardware="h200", requests=200, slots=64, concurrency=16, warmup=32,
         prompt_len=512, output_len=128),  # a closed loop, MoE
    dict(model="mistral-7b", hardware="h100-sxm", requests=200, rate=20.0, slots=32, token_budget=2048),  # window
    dict(model="llama-3.1-8b", hardware="h100-sxm", requests=300, rate=25.0, slots=32, prefill="whole",
         token_budget=1024, prompt_len="uniform:16,1000", output_len="lognormal:median=60,max=400"),
    dict(model="llama-2-13b", hardware="l40s", requests=200, rate=10.0, slots=None, prefill="whole", token_budget=2048,
         prompt_len="lognormal:median=500,max=2000", output_len="lognormal:median=150,max=1200"),  # preemptions
])
def test_continuous_serve_sim_through_fastsim_is_the_per_sequence_simulator(kw):
    """serve_runs sends continuous paged runs (one sample, no shared prefix) through fastsim with its iteration log:
    every request's times, the iteration timeline and the summary equal scheduler.simulate's (times to 1e-9: the
    vectorized step cost sums in another order)."""
    from perfmodel.serving import api as sapi
    from perfmodel.serving.scheduler import simulate as slow

    kw = dict(kw, policy="continuous")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = sapi.serve_runs(**kw)[0]
        orig = sapi._fast
        sapi._fast = lambda m, hw, tr, slots, block, sharing, prefill, budget, prec, cost, lay, conc, warm, tick: slow(
            m, hw, tr, "continuous", slots, "paged", block, sharing, prefill, budget, prec, cost=cost, layout=lay,
            concurrency=conc, warmup=warm)
        try:
            ref = sapi.serve_runs(**kw)[0]
        finally:
            sapi._fast = orig
    for k, v in ref.requests.items():
        got = fast.requests[k]
        if np.asarray(v).dtype.kind == "f":
            assert np.allclose(got, v, rtol=1e-9, atol=1e-9, equal_nan=True), k  # s: a difference of two times
        else:
            assert np.array_equal(got, v), k
    for k, v in ref.timeline.items():
        got = fast.timeline[k]
        if k == "kind":
            assert list(got) == list(v)
        else:
            assert np.allclose(got, v, rtol=1e-9, atol=1e-3 if "bytes" in k else 1e-9), k
    for k, v in ref.summary.items():
        if k == "step_evaluations":
            continue  # FastCost counts its calls its own way
        if isinstance(v, float):
            assert fast.summary[k] == pytest.approx(v, rel=1e-7, abs=1e-9, nan_ok=True), k
        else:
            assert fast.summary[k] == v, k


def test_the_step_memo_is_bounded_and_emptying_it_changes_no_time(monkeypatch):
    """StepCost memoizes compositions; a long run of many (the serving validation's workers, 7-8 GB) empties the
    memo once its keys hold MAX_HELD_ROWS rows. A memo only saves work: the times are the same either way."""
    from perfmodel import load_hardware, load_model
    from perfmodel.ops import Precision
    from perfmodel.serving import stepcost

    rows = [[(1, 100 + 16 * i), (1, 300)] for i in range(50)] + [[(64, 64), (1, 500 + j)] for j in range(50)]
    big = stepcost.StepCost(load_model("llama-3.2-1b"), load_hardware("l4"), Precision())
    want = [big(r) for r in rows]
    monkeypatch.setattr(stepcost, "MAX_HELD_ROWS", 7)
    small = stepcost.StepCost(load_model("llama-3.2-1b"), load_hardware("l4"), Precision())
    got = [small(r) for r in rows + rows]
    assert got == want + want
    assert sum(len(k) for k in small.cache) <= 7 and len(big.cache) > 7


@pytest.mark.parametrize("pp", [2, 3])
def test_an_iteration_of_a_pipelined_server_is_refused_not_priced_as_one_stage(pp):
    """Iteration-level scheduling is modelled for tp, ep and replicas: a pipeline of any depth, two stages
    included, is refused with the reason, never priced as if it had one stage."""
    from perfmodel.ops import Layout

    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    with pytest.raises(SpecError, match="not pipelines"):
        engine.mixed_step(m, hw, [1, 1], [128, 256], layout=Layout(pp=pp))
    assert engine.mixed_step(m, hw, [1, 1], [128, 256], layout=Layout(pp=1))["latency_s"] > 0


def test_the_busiest_attention_group_is_the_one_that_attends_the_most_tokens():
    """Under attention DP the sequences go longest-first to the least-loaded group (the lower group on a tie);
    the step waits for the group that attends the most tokens. One group, or one sequence, is that group's."""
    T = np.array([1, 1, 1, 1])
    # 1000 -> g0; 900 -> g1; 50 -> g1 (950); 10 -> g1 (960): g0 (1000) is the busiest
    assert engine._busiest_group(T, np.array([1000, 900, 50, 10]), 2).tolist() == [True, False, False, False]
    # 1000 -> g0; 900 -> g1; 150 -> g1 (1050); 10 -> g0 (1010): g1 is the busiest
    assert engine._busiest_group(T, np.array([1000, 900, 150, 10]), 2).tolist() == [False, True, True, False]
    # 1000 -> g0; 900 -> g1; 100 -> g1 (1000, a tie); 50 -> g0, the lower of the tied groups (1050)
    assert engine._busiest_group(T, np.array([1000, 900, 100, 50]), 2).tolist() == [True, False, False, True]
    assert engine._busiest_group(T, np.array([1000, 900, 100, 50]), 1).tolist() == [True] * 4
    assert engine._busiest_group(T[:1], np.array([7]), 4).tolist() == [True]
    assert engine._busiest_group(np.array([512, 1]), np.array([512, 4096]), 2).tolist() == [True, False]  # T x S


def test_the_step_cost_counts_each_composition_it_prices_once():
    """`step_evaluations` in a run's summary is the number of distinct batch compositions priced: a repeated
    composition comes from the memo and is not counted again."""
    from perfmodel.serving import StepCost

    sc = StepCost(load_model("llama-3.1-8b"), load_hardware("h100-sxm"), Precision(), quantum=16)
    a = sc([(1, 100), (1, 200)])
    assert sc([(1, 200), (1, 100)]) == a and sc.calls == 1  # the same rows in another order: one composition
    sc([(1, 100), (1, 120)])  # 120 rounds up to 128 with quantum 16: a new composition
    sc([(1, 100), (1, 125)])  # 125 -> 128 as well: the same one
    assert sc.calls == 2 and len(sc.cache) == 2


def test_when_the_attention_ops_change_shape_with_the_sizes_the_step_cost_is_mixed_step_itself():
    """The incremental step cost replays attention terms row by row on the op templates of its first build. If
    a later build's attention ops are not the same list (names), it cannot replay them and returns
    engine.mixed_step's time for the whole step instead; the rows it could replay keep being replayed."""
    from perfmodel.serving.stepcost import MixedStep

    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    tm = engine.time_model("roofline", hw, None)
    ms = MixedStep(m, hw, Precision(), tm=tm)
    first = ms(((1, 128), (1, 256)))
    assert first == pytest.approx(engine.mixed_step(m, hw, [1, 1], [128, 256], tm=tm)["latency_s"], rel=1e-12)
    ops, names = ms.templates["decode"]
    ms.templates["decode"] = (ops, names + ["another_kernel"])  # as if the op list had grown a kernel
    T, S = [1, 1, 1], [128, 300, 512]  # 300 and 512 are new rows: they must be built, and do not match
    got = ms(tuple(zip(T, S)))
    assert got == engine.mixed_step(m, hw, T, S, tm=tm)["latency_s"]
    assert (1, 300) not in ms.rows["decode"]  # nothing of the unmatched build was kept
    assert ms(((1, 128), (1, 256))) == first  # known rows still replay


@pytest.mark.parametrize("text, opt, longest", [
    ("2147483647", "--prompt-len", True), ("2147483648", "--prompt-len", False),
    ("uniform:1,2147483647", "--output-len", True), ("uniform:1,2147483648", "--output-len", False)])
def test_a_length_is_taken_up_to_the_largest_int32_and_refused_one_token_above(text, opt, longest):
    """numpy draws lengths as int64 and no model reads 2**31 tokens: 2**31 - 1 is the longest length taken, and
    one more is refused with the option's name and the bound."""
    from perfmodel.serving.traffic import parse_lengths

    if longest:
        assert parse_lengths(text, opt).hi == 2**31 - 1
    else:
        with pytest.raises(SpecError, match="2,147,483,647") as e:
            parse_lengths(text, opt)
        assert e.value.field is None and opt in str(e.value)


@pytest.mark.parametrize("opt", ["--token-budget", "--block-size"])
def test_a_token_budget_or_block_is_taken_up_to_2_to_the_20_and_refused_above(opt):
    """--token-budget and --block-size take up to 1,048,576 tokens (16x vLLM's largest default budget; engines use
    blocks of 16-256): the bound itself is taken, one more is refused before any work."""
    from perfmodel.serving.traffic import MAX_BLOCK, MAX_BUDGET, _whole

    bound = MAX_BUDGET if opt == "--token-budget" else MAX_BLOCK
    assert bound == 2**20 and _whole(str(2**20), opt, 1, bound) == 2**20
    with pytest.raises(SpecError, match="1,048,576"):
        _whole(str(2**20 + 1), opt, 1, bound)


@pytest.mark.parametrize("text", ["300", "uniform:3,9", "lognormal:median=2,max=40", "lognormal:median=30,max=31,sigma=2"])
def test_every_drawn_length_lies_in_the_distribution_s_stated_range_and_both_ends_are_reached(text):
    """lo and hi are a distribution's support: a lognormal draws 1 at its shortest (rounded, clipped) and its cap at
    its longest; 4,000 draws of these reach both ends."""
    from perfmodel.serving.traffic import parse_lengths

    d = parse_lengths(text, "--prompt-len")
    x = d.draw(np.random.default_rng(0), 4000)
    assert x.min() == d.lo and x.max() == d.hi == d.max


def test_a_trace_serves_as_many_requests_as_it_has_rows_and_refuses_one_more(tmp_path):
    from perfmodel.serving.traffic import make_traffic

    p = tmp_path / "t.csv"
    p.write_text("arrival_s,prompt_tokens,output_tokens\n0,10,5\n0.5,20,6\n1.0,30,7\n")
    t = make_traffic(requests=3, trace=str(p))
    assert list(t.prompt) == [10, 20, 30]
    with pytest.raises(SpecError, match="4 requested but .* has 3 rows"):
        make_traffic(requests=4, trace=str(p))


def test_a_whole_prompt_of_exactly_the_token_budget_runs_and_a_refusal_names_the_longest_prompt():
    """TensorRT-LLM's check is "should not exceed max_num_tokens": a prompt of exactly the budget is accepted; among
    prompts of several lengths the refusal names the longest (the one that decides)."""
    from perfmodel.serving.api import serve_runs

    kw = dict(requests=8, output_len=4, policy="continuous", prefill="whole")
    assert serve_runs(**kw, prompt_len=512, token_budget=512)[0].summary["prefill"] == "whole/512"
    with pytest.raises(SpecError, match=r"512 tokens is less than the \d+-token prompt of") as e:
        serve_runs(**kw, prompt_len="uniform:100,900", token_budget=512, seed=3)
    named = int(re.search(r"the (\d+)-token prompt", str(e.value))[1])
    assert serve_runs(**kw, prompt_len="uniform:100,900", token_budget=named, seed=3)  # the longest: all fit now
