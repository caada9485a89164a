"""serve-sim and kv-memory as a user calls them (serving.api): their defaults, the closed loop over replicas,
the checks on a request that cannot run, the fast path's routing, the progress bar's counts and the tables'
columns."""
import math
import re
import warnings

import numpy as np
import pytest

from perfmodel.errors import LoadWarning, SpecError
from perfmodel.serving import api
from perfmodel.serving.traffic import DEFAULT_OUTPUT, DEFAULT_PROMPT, make_traffic

M = "llama-3.1-8b"


def _row(t, i=0):
    return {k: v[i] for k, v in t.items()}


def _same(a, b):
    assert set(a) == set(b)
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x[0], str):
            assert list(x) == list(y), k
        else:
            np.testing.assert_array_equal(np.asarray(x, float), np.asarray(y, float), err_msg=k)


def test_serve_sim_s_defaults_are_8_slots_16_token_blocks_and_cost_quantum_seed_0_one_sample_one_device():
    kw = dict(model=M, requests=24)
    _same(api.serve_sim(**kw), api.serve_sim(**kw, slots=8, block_size=16, shared_prefix=0, samples=1, sharing=True,
                                             seed=0, cost_quantum=16, tp=1, ep=1, replicas=1, energy=False))
    t = api.serve_sim(**kw)
    assert list(t["policy"]) == ["static", "continuous"] and list(t["slots"]) == [8, 8]
    assert list(t["kv_manager"])[1] == "paged+shared" and list(t["prefill"])[1] == "chunked"
    assert "energy_per_token_j" not in t and "impl" not in t and "concurrency" not in t


def test_the_defaults_are_the_ones_that_matter():
    """Another cost quantum, block size, slot count or seed gives other numbers, so the defaults above are seen."""
    base = _row(api.serve_sim(model=M, requests=24, policy="continuous"))
    for kw in (dict(cost_quantum=1), dict(block_size=64), dict(slots=4), dict(seed=1)):
        other = _row(api.serve_sim(model=M, requests=24, policy="continuous", **kw))
        assert any(other[k] != base[k] for k in ("makespan_s", "mean_kv_reserved_bytes", "mean_latency_s")), kw


def test_nothing_is_printed_without_show(capsys):
    api.serve_sim(model=M, requests=8, policy="continuous")
    assert capsys.readouterr().err == ""


def test_the_progress_bar_counts_both_policies_requests_in_turn(monkeypatch):
    """One bar for every policy's requests: its total is n x policies; the continuous run, second, counts from n."""
    seen = {}

    class Bar:
        def __init__(self, total, label, show):
            seen["total"], seen["set"], self.bar = total, [], object()

        def set(self, done):
            seen["set"].append(done)

        def close(self):
            seen["closed"] = True

    import perfmodel.workers as workers

    monkeypatch.setattr(workers, "_Progress", Bar)
    api.serve_runs(model=M, requests=300, output_len=300, slots=2, show=True)
    assert seen["total"] == 600 and seen["closed"]
    s = np.asarray(seen["set"])
    assert s.size and s.min() >= 0 and s.max() <= 600 and s.max() > 300 and np.all(np.diff(s) >= 0)


# ---------------------------------------------------------------- the closed loop over replicas
@pytest.mark.parametrize("args, want", [((8, None, None, None), (8, 16)), ((8, None, None, None, 2), (4, 8)),
                                        ((4, 0, None, None), (4, 0)), ((8, 5, None, None, 2), (4, 2))])
def test_a_closed_loop_splits_its_clients_and_warm_up_over_the_replicas(args, want):
    n, warm = api.closed_loop(*args)
    assert (n, warm) == want and type(n) is int and type(warm) is int


def test_a_closed_loop_over_two_replicas_reports_all_its_clients_and_their_rate():
    """4 clients over 2 replicas: each replica runs 2 in a closed loop of 10 N R / R = 20 requests (the run of 2
    clients on one replica has 10 N = 20 too); the summary counts both replicas: 4 clients, twice the replica's
    rate and twice its requests in flight."""
    one = _row(api.serve_sim(model=M, concurrency=2, policy="continuous"))
    two = _row(api.serve_sim(model=M, concurrency=4, replicas=2, policy="continuous"))
    assert one["requests"] == two["requests"] == 20
    assert two["concurrency"] == 4 and two["request_rate"] == pytest.approx(2 * one["request_rate"], rel=1e-12)
    assert two["mean_in_flight"] == pytest.approx(2 * one["mean_in_flight"], rel=1e-12)
    assert two["tok_s_per_user"] == pytest.approx(1 / two["mean_tpot_s"], rel=1e-12)


def test_one_output_token_has_no_tpot_and_so_no_speed_per_user():
    r = _row(api.serve_sim(model=M, concurrency=2, output_len=1, policy="continuous"))
    assert math.isnan(r["mean_tpot_s"]) and math.isnan(r["tok_s_per_user"])


def test_open_loop_arrivals_split_their_rate_over_the_replicas():
    """rate 10/s over 2 replicas: one replica sees 20 of the 40 requests at 5/s, the traffic make_traffic draws."""
    (r,) = api.serve_runs(model=M, requests=40, rate=10, replicas=2, policy="continuous")
    want = make_traffic(20, 5.0, None, DEFAULT_PROMPT, DEFAULT_OUTPUT, 1, 0, 0).arrival
    np.testing.assert_array_equal(r.requests["arrival_s"], want)


def test_one_request_is_one_request():
    assert _row(api.serve_sim(model=M, requests=1, policy="continuous"))["requests"] == 1


def test_a_trace_is_not_split_over_replicas(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("arrival_s,prompt_tokens,output_tokens\n0,10,5\n0.5,20,6\n")
    with pytest.raises(SpecError, match="--replicas"):
        api.serve_sim(model=M, trace=str(p), replicas=2)


def test_a_short_trace_is_bounded_by_its_own_tokens_not_by_a_default_request_count(tmp_path):
    """Two requests of 5 and 6 tokens fit max_tokens=60 over both policies (22 tokens, 2 x 11 / 8 slots x 20 = 55
    token-equivalents of iterations); 64 default requests a policy (128) would not."""
    p = tmp_path / "t.csv"
    p.write_text("arrival_s,prompt_tokens,output_tokens\n0,10,5\n0.5,20,6\n")
    t = api.serve_sim(model=M, trace=str(p), max_tokens=60)
    assert list(t["requests"]) == [2, 2]


# ---------------------------------------------------------------- requests that cannot run
def _trace(tmp_path, rows):
    p = tmp_path / "t.csv"
    p.write_text("arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{a},{b},{c}\n" for a, b, c in rows))
    return str(p)


def test_a_request_longer_than_the_model_s_context_is_named_and_one_that_just_fits_runs(tmp_path):
    """llama-3.1-8b holds 131,072 tokens: 131,000 + 72 runs; 131,000 + 73 is refused, naming row 3 of the trace."""
    ok = _trace(tmp_path, [(0, 100, 4), (0.1, 200, 4), (0.2, 131000, 72)])
    api.serve_sim(model=M, trace=ok, policy="continuous", max_tokens=10 ** 7)
    bad = _trace(tmp_path, [(0, 100, 4), (0.1, 131000, 72), (0.2, 131000, 73)])  # row 3 just fits, row 4 does not
    with pytest.raises(SpecError, match=r"row 4.*prompt 131000 \+ output 73 tokens exceed .*max_context \(131072\)"):
        api.serve_sim(model=M, trace=bad, policy="continuous")


def test_a_request_whose_cache_alone_does_not_fit_is_named(tmp_path):
    """With 17 GB of memory the 8B model leaves ~1 GB: 100 tokens fit, 100,000 do not (row 3). The run does not
    fit: a result that names the row, with nothing served."""
    tr = _trace(tmp_path, [(0, 100, 4), (0.1, 100000, 4)])
    t = api.serve_sim(model=M, trace=tr, policy="continuous", sets={"memory_capacity": "17 GB"})
    assert re.search(r"row 3.*its KV cache does not fit", t["does_not_fit"][0])
    assert math.isnan(t["throughput_tok_s"][0]) and t["tokens"][0] == 0


# ---------------------------------------------------------------- the fast path and what it labels
def test_each_kv_manager_sharing_and_sample_count_is_simulated_as_asked():
    """The fast path takes paged caches, one sample, no shared prefix; the rest goes to the per-sequence simulator:
    a contiguous run is labelled and priced as one, two samples double the sequences, a shared prefix saves."""
    kw = dict(model=M, requests=16, policy="continuous")
    c = _row(api.serve_sim(**kw, kv_manager="contiguous"))
    p = _row(api.serve_sim(**kw))
    assert c["kv_manager"] == "contiguous" and p["kv_manager"] == "paged+shared"
    assert c["mean_kv_reserved_bytes"] != p["mean_kv_reserved_bytes"]
    two = _row(api.serve_sim(**kw, samples=2))
    drawn = make_traffic(16, None, None, DEFAULT_PROMPT, DEFAULT_OUTPUT, 2, 0, 0)
    assert two["sequences"] == 32 and two["tokens"] == drawn.outputs.sum() > drawn.outputs[:, 0].sum()
    assert _row(api.serve_sim(**kw, shared_prefix=256))["mean_kv_saved_bytes"] > 0


def test_an_open_loop_table_has_no_closed_loop_columns_and_the_achievable_one_names_its_profile():
    assert "concurrency" not in api.serve_sim(model=M, requests=8, rate=5, policy="continuous")
    t = api.serve_sim(model=M, requests=8, mode="achievable", policy="continuous")
    assert list(t["impl"]) == ["graphs"]


def test_a_price_adds_the_cost_column():
    t = api.serve_sim(model=M, requests=8, policy="continuous", price=2.0, hardware="rtx-4090")
    assert "cost_per_million_tokens" in t and t["cost_per_million_tokens"][0] > 0
    assert "cost_per_million_tokens" not in api.serve_sim(model=M, requests=8, policy="continuous", hardware="rtx-4090",
                                                          sets={"price_per_hour": None})


def test_an_overloaded_open_loop_run_warns_naming_the_catalog_device():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        api.serve_sim(model=M, requests=400, rate=2000, slots=2, policy="continuous")
    msgs = [str(x.message) for x in w if issubclass(x.category, LoadWarning)]
    assert msgs and "llama-3.1-8b on h100-sxm" in msgs[0]


def test_a_trace_that_arrives_faster_than_it_is_served_warns_too(tmp_path):
    tr = _trace(tmp_path, [(i / 2000, 200, 200) for i in range(400)])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        api.serve_sim(model=M, trace=tr, slots=2, policy="continuous")
    assert [x for x in w if issubclass(x.category, LoadWarning)]


def test_the_offered_rate_is_over_the_arrivals_own_span():
    """Arrivals from 10 s to 20 s: (11 - 1) / 10 s = 1/s, not (11 - 1) / 30 s."""
    from types import SimpleNamespace

    t = np.arange(10.0, 21.0)
    run = SimpleNamespace(summary={"requests": 11, "makespan_s": 20.0, "policy": "continuous"},
                          requests={"arrival_s": t}, timeline={"t_start_s": t, "duration_s": np.ones(11),
                                                               "waiting": t - 10.0})
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        api._overload([run], "m", "d")
    assert "requests arrive at 1/s per replica" in str(w[0].message)


def test_the_timeline_of_one_run_is_its_own():
    (r,) = api.serve_runs(model=M, requests=8, policy="continuous")
    t = api.timeline([r])
    assert len(t["step"]) == len(r.timeline["step"]) and set(t["policy"]) == {"continuous"}


def test_a_block_of_one_token_runs_and_a_block_of_none_is_refused():
    assert _row(api.serve_sim(model=M, requests=4, policy="continuous", block_size=1))["requests"] == 4
    with pytest.raises(SpecError, match="--block-size.*>= 1"):
        api.serve_sim(model=M, requests=4, block_size=0)


# ---------------------------------------------------------------- kv-memory
def test_kv_memory_s_defaults_are_256_requests_16_token_blocks_and_cost_quantum_seed_0():
    a = api.kv_memory(model=M)
    b = api.kv_memory(model=M, requests=256, block_size=16, shared_prefix=0, samples=1, seed=0, cost_quantum=16)
    _same(a, b)
    assert api.kv_memory(model=M, seed=1)["mean_latency_s"][1] != a["mean_latency_s"][1]  # the seed draws the outputs
    assert list(a["manager"]) == ["contiguous", "paged", "paged+shared"] and list(a["requests"]) == [256] * 3


def test_kv_memory_runs_each_block_size_with_its_own_blocks_and_shares_only_where_it_says():
    t = api.kv_memory(model=M, requests=24, block_size=[16, 256], shared_prefix=512)
    assert list(t["manager"]) == ["contiguous", "paged", "paged+shared", "paged", "paged+shared"]
    assert t["mean_internal_bytes"][3] > t["mean_internal_bytes"][1]  # 256-token blocks waste more than 16-token ones
    assert t["mean_saved_bytes"][1] == t["mean_saved_bytes"][3] == 0 < t["mean_saved_bytes"][2]
    assert "impl" not in t and list(api.kv_memory(model=M, requests=8, mode="achievable")["impl"]) == ["graphs"] * 3


def test_kv_memory_counts_three_runs_a_block_size_against_the_bound():
    """contiguous + (paged, paged+shared) per block size: 1 + 2 x 2 runs of 20 requests = 100 sequences, of 8
    tokens each: 800 generated tokens."""
    kw = dict(model=M, requests=20, block_size=[16, 32], output_len=8)
    api.kv_memory(**kw, max_tokens=800)
    with pytest.raises(SpecError, match=r"20 requests generate 800 tokens over 5 run\(s\)"):
        api.kv_memory(**kw, max_tokens=799)
    with pytest.raises(SpecError, match="100 sequences x runs"):
        api.kv_memory(**kw, max_tokens=99)
    with pytest.raises(SpecError, match="--block-size.*>= 1"):
        api.kv_memory(model=M, requests=4, block_size=0)


def test_kv_memory_with_nothing_held_between_iterations_has_no_utilization():
    t = api.kv_memory(model=M, requests=8, output_len=1)
    assert all(math.isnan(u) for u in t["utilization"])


def test_a_request_that_cannot_fit_alone_is_a_does_not_fit_result_not_an_error(capsys):
    """Llama-3.1-8B on an L4 (24 GB): a 100,000-token prompt's KV cache (13.1 GB at 131,072 B a token) does not fit
    in the 8.1 GB the weights leave. serve-sim and kv-memory say so as a result: exit 0, a row per policy or manager
    with nothing served (times and rates NaN, no iteration), and the reason; the API gives the same rows. A request
    within max_context that fits runs as before."""
    import math

    import perfmodel as pm
    from perfmodel.cli import main

    kw = dict(prompt_len="100000", output_len="100", requests=10)
    t = pm.serve_sim("llama-3.1-8b", "l4", **kw)
    assert list(t["policy"]) == ["static", "continuous"]
    assert all("request 0: its KV cache does not fit" in x for x in t["does_not_fit"])
    for c in ("throughput_tok_s", "mean_ttft_s", "mean_tpot_s", "makespan_s"):
        assert all(math.isnan(v) for v in t[c]), c
    assert list(t["tokens"]) == [0, 0] and list(t["steps"]) == [0, 0]
    runs = pm.serve_runs("llama-3.1-8b", "l4", policy="continuous", **kw)
    assert len(runs[0].timeline["step"]) == 0 and runs[0].summary["does_not_fit"]
    assert main(["serve-sim", "-m", "llama-3.1-8b", "-H", "l4", "--prompt-len", "100000", "--output-len", "100",
                 "--requests", "10"]) in (0, None)
    out = capsys.readouterr().out
    assert "# does not fit (a result, not an error" in out and "8.092e+09 B left after llama-3.1-8b's weights" in out
    assert main(["kv-memory", "-m", "llama-3.1-8b", "-H", "l4", "--prompt-len", "100000", "--output-len", "100",
                 "--requests", "10"]) in (0, None)
    assert "# does not fit" in capsys.readouterr().out
    ok = pm.serve_sim("llama-3.1-8b", "l4", prompt_len="1000", output_len="100", requests=10)
    assert "does_not_fit" not in ok and all(v > 0 for v in ok["throughput_tok_s"])


def test_one_policy_can_fit_where_the_other_does_not_and_each_row_says_which(capsys):
    """Four samples of a 20,000-token prompt on an L4 (61,740 tokens of KV cache for Llama-3.1-8B): static batching
    pads a copy of the prompt per sample (80,400 tokens) and does not fit; paged blocks with the prompt shared hold
    20,400 and run. The table keeps both rows, each with its own does_not_fit ("" where the run fit), and the notes
    that compare the runs are left out; in csv no note line is printed. kv-memory: the contiguous and unshared paged
    managers do not fit, the shared one runs and keeps its numbers."""
    import math

    import perfmodel as pm
    from perfmodel.cli import main

    kw = dict(prompt_len="20000", output_len="100", requests=4, samples=4, shared_prefix=0)
    t = pm.serve_sim("llama-3.1-8b", "l4", **kw)
    assert list(t["policy"]) == ["static", "continuous"]
    assert "does not fit" in t["does_not_fit"][0] and t["does_not_fit"][1] == ""
    assert math.isnan(t["throughput_tok_s"][0]) and t["throughput_tok_s"][1] > 0
    assert t["steps"][0] == 0 and t["steps"][1] > 0
    runs = pm.serve_runs("llama-3.1-8b", "l4", policy="static", **kw)
    assert runs[0].summary["step_evaluations"] == 0 and len(runs[0].requests["ttft_s"]) == 4
    args = ["-m", "llama-3.1-8b", "-H", "l4", "--prompt-len", "20000", "--output-len", "100", "--requests", "4",
            "--samples", "4"]
    assert main(["serve-sim", *args]) in (0, None)
    out = capsys.readouterr().out
    assert "# does not fit" in out and "continuous vs static" not in out
    assert main(["serve-sim", *args, "--format", "csv"]) in (0, None)
    out = capsys.readouterr().out
    assert "# does not fit" not in out and "does not fit" in out.splitlines()[1]
    k = pm.kv_memory("llama-3.1-8b", "l4", prompt_len="20000", output_len="100", requests=4, samples=4)
    assert list(k["manager"]) == ["contiguous", "paged", "paged+shared"] and list(k["block_size"][1:]) == [16, 16]
    assert [bool(x) for x in k["does_not_fit"]] == [True, True, False]
    import pandas as pd

    assert pd.isna(k["peak_sequences"][0]) and pd.isna(k["mean_used_bytes"][1]) and k["peak_sequences"][2] > 0
    assert list(k["requests"]) == [4, 4, 4] and k["kv_capacity_bytes"][0] == k["kv_capacity_bytes"][2] > 0
    kv = ["kv-memory", "-m", "llama-3.1-8b", "-H", "l4", "--prompt-len", "20000", "--output-len", "100", "--requests",
          "4", "--samples", "4"]
    assert main([*kv, "--format", "csv"]) in (0, None)
    out = capsys.readouterr().out
    assert "# does not fit" not in out and out.splitlines()[0].endswith("does_not_fit")


def test_a_run_that_fits_keeps_its_notes_and_no_does_not_fit_column(capsys):
    """The notes of serve-sim (continuous against static, the closed loop's Little's law) and kv-memory's table are
    as before when every request fits; an unfit closed loop prints no Little's-law line."""
    from perfmodel.cli import main

    base = ["-m", "llama-3.1-8b", "-H", "l4", "--output-len", "32", "--requests", "16"]
    assert main(["serve-sim", *base, "--prompt-len", "512"]) in (0, None)
    out = capsys.readouterr().out
    assert "continuous vs static" in out and "does not fit" not in out
    closed = ["--concurrency", "4", "--policy", "continuous"]
    assert main(["serve-sim", *base, "--prompt-len", "512", *closed]) in (0, None)
    assert "# closed loop: 4 clients" in capsys.readouterr().out
    assert main(["serve-sim", *base, "--prompt-len", "100000", "--concurrency", "4", "--policy", "continuous"]) in (
        0, None)
    out = capsys.readouterr().out
    assert "# closed loop" not in out and "# does not fit" in out
    assert main(["kv-memory", *base, "--prompt-len", "512", "--format", "csv"]) in (0, None)
    assert "does_not_fit" not in capsys.readouterr().out
