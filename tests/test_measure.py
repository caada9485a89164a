"""The measurement harness: case accounting, the timing loop (fake clocks), the decode step's fidelity to
the op list, calibration and the validation maths. No test asserts on a wall-clock time."""
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st


from perfmodel.cli import main
from perfmodel.engine import memory
from perfmodel.ops import build_ops, param_count
from perfmodel.specs import Hardware, load_hardware
from perfmodel.measure import cases as C
from perfmodel.measure import cuda, suite
from perfmodel.measure.calibrate import calibrate
from perfmodel.measure.cpu import CPUBackend, NumpyXP
from perfmodel.measure.llama import DecodeStep, attention
from perfmodel.measure.timing import WallTimer, time_fn
from perfmodel.measure.validate import as_json, by_family, op_breakdown, validate

DOCS_RUN = Path(__file__).resolve().parent.parent / "docs" / "validation" / "cpu-quick"
TINY = {"D": 32, "N": 4, "K": 2, "H": 8, "F": 48, "V": 50, "L": 2}
dims = st.integers(1, 4096)


# ---------------------------------------------------------------- accounting of each case
@given(B=dims, D=dims, F=dims, dtype=st.sampled_from(["fp32", "bf16", "fp16"]))
def test_the_sweep_counts_2BDF_flops_and_reads_x_and_w_once_and_writes_y(B, D, F, dtype):
    c, s = C.sweep_case(B, D, F, dtype), C.ITEMSIZE[dtype]
    assert c.flops == 2 * B * D * F
    assert c.bytes == s * (B * D + D * F + B * F)


@given(B=st.integers(1, 64), S=st.integers(1, 65536), K=st.integers(1, 16), G=st.integers(1, 8),
       H=st.sampled_from([64, 128]), dtype=st.sampled_from(["fp32", "bf16"]))
def test_decode_attention_reads_the_kv_cache_once_and_moves_the_unfused_score_matrix(B, S, K, G, H, dtype):
    N, s = K * G, C.ITEMSIZE[dtype]
    c = C.attention_case(B, S, N, K, H, dtype)
    assert c.flops == 4 * B * S * N * H + 5 * B * N * S  # QK^T and AV, plus the softmax at 5 FLOP/score
    # q read, o written; K and V read once (GQA: K heads); scores written, softmaxed (read + write), re-read
    assert c.bytes == s * (2 * B * N * H + 2 * B * S * K * H + 4 * B * N * S)


@given(n=st.integers(1, 10**10), M=dims, N=dims, K=dims, dtype=st.sampled_from(list(C.ITEMSIZE)))
def test_calibration_cases_count_bytes_read_plus_written_and_2MNK_flops(n, M, N, K, dtype):
    s = C.ITEMSIZE[dtype]
    assert C.copy_case(n, dtype).bytes == 2 * n * s
    assert C.reduce_case(n, dtype).bytes == n * s
    g = C.gemm_case(M, N, K, dtype)
    assert (g.flops, g.bytes) == (2 * M * N * K, s * (M * K + K * N + M * N))


def test_a_decode_case_is_exactly_the_engine_op_list_of_its_model():
    c = C.decode_case(TINY, 3, 17, "fp32")
    ops = build_ops(C.llama_model(TINY), 3, 1, 17, "decode", C.precision("fp32"), attention="unfused")
    assert c.flops == sum(o.flops * o.count for o in ops) and c.bytes == sum(o.bytes * o.count for o in ops)


# ---------------------------------------------------------------- the decode step does what the engine counts
def _expanded(ops, L):
    """The engine's op names in execution order, per-layer ops repeated for each layer."""
    layer = [o.name for o in ops if o.count == L]
    first = next(i for i, o in enumerate(ops) if o.count == L)
    return [o.name for o in ops[:first]] + layer * L + [o.name for o in ops[first + len(layer):]]


@pytest.mark.parametrize("B,S", [(1, 1), (2, 9)])
def test_the_numpy_decode_step_runs_the_engine_ops_in_order_with_its_parameters_and_cache(B, S):
    step = DecodeStep(NumpyXP(0), TINY, B, S, "fp32")
    ops = build_ops(C.llama_model(TINY), B, 1, S, "decode", C.precision("fp32"), attention="unfused")
    assert [n for n, _ in step.ops] == _expanded(ops, TINY["L"])
    assert sum(w.size for w in step.weights()) == param_count(C.llama_model(TINY))
    mem = memory(ops, C.llama_model(TINY), B, S, C.precision("fp32"))
    assert sum(w.nbytes for w in step.weights()) == mem["weight_bytes"]
    assert sum(k.nbytes + v.nbytes for k, v in step.caches) == mem["kv_cache_bytes"]
    logits = step()
    assert logits.shape == (B, TINY["V"]) and logits.dtype == np.float32 and np.all(np.isfinite(logits))


def test_gqa_attention_equals_the_per_head_definition():
    xp, rng = NumpyXP(1), np.random.default_rng(2)
    B, N, K, S, H = 2, 6, 2, 7, 4
    q, kc, vc = (rng.standard_normal(s).astype(np.float32) for s in [(B, N, H), (B, K, S, H), (B, K, S, H)])
    out = attention(xp, q.copy(), kc, vc).reshape(B, N, H)
    for b in range(B):
        for n in range(N):
            j = n // (N // K)  # query head n reads KV head n // G
            s = kc[b, j] @ q[b, n]
            p = np.exp(s - s.max())
            np.testing.assert_allclose(out[b, n], (p / p.sum()) @ vc[b, j], rtol=1e-5, atol=1e-6)


def test_rope_is_a_rotation_and_rmsnorm_normalises():
    xp, rng = NumpyXP(0), np.random.default_rng(3)
    from perfmodel.measure.llama import rope_tables

    x = rng.standard_normal((3, 5, 16)).astype(np.float32)
    cos, sin = (a.astype(np.float32) for a in rope_tables(11, 16))
    y = xp.rope(x, cos, sin)
    pair = lambda a: a[..., :8] ** 2 + a[..., 8:] ** 2  # noqa: E731  each rotated (i, i + H/2) pair
    np.testing.assert_allclose(pair(y), pair(x), rtol=1e-5)
    n = xp.rmsnorm(x, np.ones(16, np.float32), eps=0.0)
    np.testing.assert_allclose(np.sqrt(np.mean(n * n, axis=-1)), 1.0, rtol=1e-5)


def test_rotation_copies_never_share_memory_and_fill_the_pool():
    pool = suite.Pool(NumpyXP(0), 4096 * 4)
    sets = pool.sets([(3, 5), (5, 7)], "fp32")
    size = 3 * 5 + 5 * 7
    assert len(sets) * size <= 4096 < (len(sets) + 1) * size
    flat = [a for s in sets for a in s]
    assert not any(np.shares_memory(a, b) for i, a in enumerate(flat) for b in flat[i + 1:])
    assert all(np.all(a != 0) for a in flat)  # random, never zeros


def test_operands_too_big_to_rotate_are_shared_by_shape_and_position_while_a_case_holds_them():
    pool = suite.Pool(NumpyXP(0), 64 * 4)
    a = pool.sets([(2, 40), (40, 50)], "fp32")  # the sweep's X and W at B = 2 ...
    b = pool.sets([(4, 40), (40, 50)], "fp32")  # ... and at B = 4: one W between them
    assert len(a) == len(b) == 1 and a[0][1] is b[0][1] and a[0][0].shape != b[0][0].shape
    kv = pool.sets([(3, 30), (3, 30)], "fp32")  # K and V have one shape but are two arrays
    assert not np.shares_memory(kv[0][0], kv[0][1])
    assert (1, (40, 50), "fp32") in pool.big
    del a, b  # the last cases holding that W are gone: so is the W
    assert (1, (40, 50), "fp32") not in pool.big


# ---------------------------------------------------------------- the timing loop, with fake clocks
class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


@given(st.lists(st.floats(1e-6, 10.0), min_size=2, max_size=12), st.integers(0, 3))
def test_the_median_is_over_the_timed_repeats_only(durations, warmup):
    if warmup >= len(durations):
        return
    clock, calls = FakeClock(), []

    def fn(i):
        calls.append(i)
        clock.t += durations[i]

    t = time_fn(fn, repeats=len(durations) - warmup, warmup=warmup, timer=WallTimer(clock), cpu_clock=lambda: 0.0)
    assert calls == list(range(len(durations)))  # the call index lets a case rotate its buffers
    np.testing.assert_allclose(t.samples, durations[warmup:], rtol=1e-9, atol=1e-9)
    assert t.median == pytest.approx(float(np.median(durations[warmup:])), rel=1e-9, abs=1e-9)
    assert t.min <= t.median <= t.max and t.warmup == warmup and t.inner == 1


def test_each_sample_is_bracketed_by_synchronize_then_clock():
    log, clock = [], FakeClock()

    def read():
        log.append("clock")
        return clock()

    timer = WallTimer(read, sync=lambda: log.append("sync"))
    time_fn(lambda i: log.append("run"), repeats=2, warmup=1, timer=timer, cpu_clock=lambda: 0.0)
    assert log == ["run"] + ["sync", "clock", "run", "sync", "clock"] * 2


def test_tiny_ops_are_timed_over_an_inner_loop_long_enough_for_the_clock():
    clock = FakeClock()

    def fn(i):
        clock.t += 2e-6

    t = time_fn(fn, repeats=3, warmup=2, timer=WallTimer(clock), min_sample_s=1e-3, cpu_clock=lambda: 0.0)
    assert t.inner * 2e-6 >= 1e-3
    np.testing.assert_allclose(t.samples, 2e-6, rtol=1e-6)


def test_cuda_event_timing_converts_milliseconds_and_waits_for_the_end_event():
    clock, log = FakeClock(), []

    class Event:  # the part of torch.cuda.Event the timer uses
        def record(self):
            self.t = clock()

        def synchronize(self):
            log.append("sync")

        def elapsed_time(self, end):
            return (end.t - self.t) * 1e3

    def fn(i):
        clock.t += 0.25 * (i + 1)

    t = time_fn(fn, repeats=3, warmup=1, timer=cuda.EventTimer(Event), cpu_clock=lambda: 0.0)
    np.testing.assert_allclose(t.samples, [0.5, 0.75, 1.0])
    assert log == ["sync"] * 3


class _LogRunner(suite.Runner):
    """A Runner whose cases log their calls on a fake clock instead of running (the schedule alone)."""

    def __init__(self, p, log, built):
        self.p, self.log, self.built, self.profiles = p, log, built, {}
        self.clock = FakeClock()

    def sampler(self, c):
        from perfmodel.measure.timing import Sampler

        self.built.append(c.name)
        warming = [True]

        def fn(i):
            if not warming[0]:  # the log holds the timed calls only
                self.log.append(c.name)
            self.clock.t += 1e-3

        s = Sampler(fn, WallTimer(self.clock), cpu_clock=lambda: 0.0).warm(self.p["warmup"])
        warming[0] = False
        return s


@pytest.mark.parametrize("budget", [1e12, 0.0])
def test_interleaved_rounds_sample_every_case_in_every_round_and_probe_bandwidth_after_settling(budget):
    class Backend:
        def settle(self):
            log.append("settle")

    p = suite._sizes("cpu", "tiny")
    cases = suite.build_cases(p, type("B", (), {"act_dtype": "fp32", "gemm_dtypes": lambda self: ["fp32"]})())
    cal = [c for c in cases if c.role == "calibration"]
    val = [c for c in cases if c.role == "validation"]
    log, built = [], []
    recs = suite.interleave(cal, val, _LogRunner(p, log, built), Backend(), budget)
    parts = suite.groups(val, budget)
    assert len(parts) == (1 if budget else len(val))  # a budget of 0 puts each case in a group of its own
    R = p["repeats"] * len(parts)
    rounds = " ".join(log).split("settle")[1:]
    assert log[0] == "settle"
    assert len(rounds) == R
    runner = _LogRunner(p, [], [])
    for c in cal:  # every calibration case gets its samples, spread over all rounds
        assert recs[c.name]["repeats"] == runner.repeats(c) == sum(suite.spread(runner.repeats(c), R))
    for c in val:
        assert recs[c.name]["repeats"] == p["repeats"]
    k = 0
    for part in parts:
        for r in rounds[k:k + p["repeats"]]:
            names = r.split()
            assert sorted(n for n in names if n.split("/")[0] in C.VALIDATION) == sorted(c.name for c in part)
            probes = [n for n in names if n.split("/")[0] in suite.BANDWIDTH]
            assert names[:len(probes)] == probes  # the bandwidth probes run first, right after settling
        k += p["repeats"]
    # a group's cases are built only when the group starts: never more than one group alive
    first_val = built.index(val[0].name)
    assert built[:first_val] == [c.name for c in cal]
    assert built[first_val:] == [c.name for c in val]


def test_spread_puts_n_samples_over_r_rounds_evenly():
    for n, r in [(27, 9), (9, 9), (3, 7), (45, 15), (5, 2)]:
        s = suite.spread(n, r)
        assert sum(s) == n and len(s) == r and max(s) - min(s) <= 1


def test_the_cuda_backend_imports_without_a_gpu_and_says_why_it_cannot_run(capsys):
    ok, why = cuda.available()
    if ok:
        pytest.skip("a CUDA device is present")
    assert why
    assert main(["measure", "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("perfmodel: error: --device cuda") and why in err


# ---------------------------------------------------------------- calibration and validation maths
def _machine(hw: Hardware) -> dict:
    """Results of a machine that behaves exactly like its spec (times from the engine itself)."""
    class Spec:
        name, act_dtype = "cpu", "fp32"

        def gemm_dtypes(self):
            return ["fp32"]

    p = suite.plan("cpu", "tiny")
    recs = []
    for c in suite.build_cases(p, Spec()):
        if c.family in ("copy", "reduce"):
            t = c.bytes / hw.memory_bandwidth
        elif c.family == "gemm":
            t = c.flops / hw.peak(c.dtype)
        else:
            t = C.predict(c, hw)
        recs.append({**c.record(), "median_s": t, "repeats": 1, "achieved_bytes_per_s": c.bytes / t if c.bytes else None,
                     "achieved_flops_per_s": c.flops / t if c.flops else None})
    return {"meta": {"device": "spec", "memory_bytes": 1e9, "decode_model": p["decode"]["model"]}, "cases": recs}


def _ko_tol(res: dict) -> float:
    """How far kernel_overhead can move when the YAML rounds the ceilings to 6 significant digits
    (relative 5e-6 of the longest dispatch op)."""
    return 1e-5 * max(r["median_s"] for r in res["cases"] if r["family"] == "dispatch") + 1e-12


@given(bw=st.floats(1e9, 1e13), peak=st.floats(1e10, 1e16), ko=st.sampled_from([0.0, 1e-7, 3e-6, 4e-5]))
def test_a_machine_that_is_its_spec_calibrates_to_it_and_validates_with_zero_error(bw, peak, ko):
    hw = Hardware("spec", 1e9, bw, {"fp32": peak}, kernel_overhead=ko or None)
    res = _machine(hw)
    text, got, _ = calibrate(res)
    assert got.memory_bandwidth == pytest.approx(bw, rel=1e-5) and got.peak("fp32") == pytest.approx(peak, rel=1e-5)
    assert (got.kernel_overhead or 0.0) == pytest.approx(ko, rel=1e-3, abs=_ko_tol(res))
    assert "results.csv case 'reduce/fp32/" in got.sources["memory_bandwidth"]
    t = validate(_machine(hw), got)
    assert set(t["family"]) == set(C.VALIDATION)
    assert np.max(np.abs(t["error"])) < 1e-3


@given(bw=st.floats(1e9, 1e13), ridge=st.floats(2.0, 1e3), k=st.floats(1.0, 6.0),
       ko=st.sampled_from([0.0, 1e-7, 3e-6]))
def test_a_machine_whose_multi_row_matmuls_move_the_weights_k_times_calibrates_back_to_k(bw, ridge, k, ko):
    # the skinny case (3 rows) is memory-bound on every such machine (intensity < 1.4 FLOP/B < ridge)
    hw = Hardware("spec", 1e9, bw, {"fp32": ridge * bw}, kernel_overhead=ko or None, gemm_weight_passes=k)
    res = _machine(hw)
    text, got, _ = calibrate(res)
    assert got.gemm_weight_passes == pytest.approx(k, rel=1e-3)
    assert (got.kernel_overhead or 0.0) == pytest.approx(ko, rel=1e-3, abs=_ko_tol(res))
    src = got.sources["gemm_weight_passes"]
    assert "results.csv case 'skinny/fp32/M=3,D=48,F=80'" in src and "/ weight bytes" in src
    t = validate(res, got)
    assert np.max(np.abs(t["error"])) < 1e-3
    if k > 1.1 and not ko:  # the term is what makes the prediction right: without it multi-row cases come out too fast
        bare = validate(res, got, passes=False)
        assert np.min(bare["error"]) < -1e-2 and np.all(bare["error"] < 1e-3)


@given(bw=st.floats(1e9, 1e13), k=st.floats(1.0, 6.0), kv=st.floats(1.0, 9.0), ko=st.sampled_from([0.0, 1e-7, 3e-6]))
def test_attention_that_moves_its_kv_cache_kv_times_calibrates_back_to_kv_apart_from_the_weight_passes(bw, k, kv, ko):
    hw = Hardware("spec", 1e9, bw, {"fp32": 100 * bw}, kernel_overhead=ko or None, gemm_weight_passes=k,
                  attention_kv_passes=kv)
    res = _machine(hw)
    _, got, _ = calibrate(res)
    assert got.attention_kv_passes == pytest.approx(kv, rel=1e-3) and got.gemm_weight_passes == pytest.approx(k, rel=1e-3)
    assert "results.csv case 'kv/fp32/N=4,K=2,H=16/B=3,S=24'" in got.sources["attention_kv_passes"]
    t = validate(res, got)
    assert np.max(np.abs(t["error"])) < 1e-3
    if abs(kv - k) > 0.5 and not ko:  # one number for both would be wrong on attention
        att = np.asarray(t["family"]) == "attention"
        shared = validate(res, got, kv=False)
        assert np.min(np.abs(shared["error"][att])) > 1e-2


def test_without_its_own_kv_term_attention_pays_the_weight_passes():
    hw = Hardware("old spec", 1e9, 2e10, {"fp32": 4e11}, gemm_weight_passes=3.0)
    c = C.attention_case(2, 64, 4, 2, 16, "fp32")
    assert C.predict(c, hw) == pytest.approx(C.predict(c, hw.replace(attention_kv_passes=3.0)))
    assert C.predict(c, hw) > C.predict(c, hw.replace(attention_kv_passes=1.0))


@pytest.mark.parametrize("field", ["gemm_weight_passes", "attention_kv_passes"])
def test_a_passes_term_below_one_read_is_refused_in_one_line(tmp_path, capsys, field):
    bad = tmp_path / "hw.yaml"
    bad.write_text("name: x\nsource: me\nmemory_capacity: 1 GB\nmemory_bandwidth: 10 GB/s\n"
                   f"peak_flops: {{fp32: 1 TFLOP/s}}\n{field}: 0.5\n")
    assert main(["decode", "-H", str(bad), "--act-dtype", "fp32", "--weights-dtype", "fp32"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{field}: 0.5 is below 1" in err and str(bad) in err


def test_packing_adds_to_compute_so_it_calibrates_even_when_compute_bound_and_is_one_without_it():
    slow_alus = Hardware("slow ALUs", 1e9, 1e11, {"fp32": 1e10}, gemm_weight_passes=4.0)  # ridge 0.1 FLOP/B
    _, got, _ = calibrate(_machine(slow_alus))
    assert got.gemm_weight_passes == pytest.approx(4.0, rel=1e-6)
    _, got, _ = calibrate(_machine(Hardware("cuBLAS-like", 1e9, 1e11, {"fp32": 1e14})))
    assert got.gemm_weight_passes == 1.0 and got.attention_kv_passes == 1.0


def test_the_calibrated_yaml_is_a_spec_every_command_loads(tmp_path):
    hw = Hardware("spec", 1e9, 2e10, {"fp32": 4e11}, kernel_overhead=2e-6, gemm_weight_passes=3.5)
    text, got, _ = calibrate(_machine(hw))
    path = tmp_path / "measured.yaml"
    path.write_text(text)
    loaded = load_hardware(str(path))
    assert loaded.gemm_weight_passes == pytest.approx(3.5, rel=1e-3) == got.gemm_weight_passes
    assert loaded.kernel_overhead == pytest.approx(2e-6, rel=1e-3)
    assert yaml.safe_load(text)["gemm_weight_passes"]["value"] == pytest.approx(3.5, rel=1e-3)  # a plain number
    saved = load_hardware(str(DOCS_RUN / "measured.yaml"))  # the run recorded in docs/validation.md
    assert saved.gemm_weight_passes >= 1.0 and "skinny/" in saved.sources["gemm_weight_passes"]


def test_validate_shows_what_the_weight_passes_buy_and_can_leave_them_out(tmp_path, capsys):
    hw = Hardware("spec", 1e9, 2e10, {"fp32": 4e11}, gemm_weight_passes=3.0)
    res = _machine(hw)
    suite.write(res, tmp_path)
    (tmp_path / "measured.yaml").write_text(calibrate(res)[0])
    assert main(["validate", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "median, passes = 1" in out and "gemm_weight_passes 3" in out and "median, kv = weight passes" in out
    assert main(["validate", str(tmp_path), "--format", "json"]) == 0
    assert max(abs(c["error"]) for c in json.loads(capsys.readouterr().out)["cases"]) < 1e-3
    assert main(["validate", str(tmp_path), "--no-weight-passes", "--format", "json"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert set(j) == {"cases", "median_abs_error", "p90_abs_error"} and j["median_abs_error"] > 1e-2
    bare = validate(res, load_hardware(str(tmp_path / "measured.yaml")), passes=False)
    assert [c["error"] for c in j["cases"]] == pytest.approx(list(bare["error"]))


@given(st.lists(st.floats(-0.9, 3.0), min_size=1, max_size=30))
def test_errors_are_signed_predicted_over_measured_and_summarised_by_median_and_p90(errs):
    hw = load_hardware("h100-sxm")
    res = _machine(hw)
    val = [r for r in res["cases"] if r["role"] == "validation"]
    errs = (errs * len(val))[: len(val)]
    for r, e in zip(val, errs):
        r["median_s"] = r["median_s"] / (1 + e)  # measured slower (e > 0) when the engine over-predicts
    t = validate(res, hw)
    np.testing.assert_allclose(t["error"], errs, rtol=1e-9, atol=1e-12)
    j = as_json(t)
    assert set(j) == {"cases", "median_abs_error", "p90_abs_error"}
    assert all(set(c) == {"case", "family", "predicted_s", "measured_s", "error"} for c in j["cases"])
    assert j["median_abs_error"] == pytest.approx(np.median(np.abs(errs)))
    assert j["p90_abs_error"] == pytest.approx(np.percentile(np.abs(errs), 90))
    fam = by_family(t)
    assert fam["family"][-1] == "all" and fam["median_abs_error"][-1] == pytest.approx(j["median_abs_error"])
    assert np.all(fam["p90_abs_error"] >= fam["median_abs_error"])


def test_every_op_instance_pays_the_kernel_overhead_once():
    hw = load_hardware("h100-sxm")
    for c in [C.sweep_case(4, 64, 96, "bf16"), C.attention_case(2, 33, 4, 2, 8, "bf16"), C.decode_case(TINY, 2, 9, "bf16")]:
        n = sum(o.count for o in C.case_ops(c)[0])
        assert C.predict(c, hw.replace(kernel_overhead=5e-6)) - C.predict(c, hw) == pytest.approx(n * 5e-6)
    assert sum(o.count for o in C.case_ops(C.decode_case(TINY, 2, 9, "bf16"))[0]) == 13 * TINY["L"] + 3


def test_efficiency_factors_are_measured_over_datasheet():
    h100 = load_hardware("h100-sxm")
    hw = Hardware("x", 1e9, 0.5 * h100.memory_bandwidth, {"fp32": 0.8 * h100.peak("fp32")})
    text, _, eff = calibrate(_machine(hw), like=h100)
    assert eff == pytest.approx({"memory_bandwidth": 0.5, "peak_flops.fp32": 0.8}, rel=1e-5)
    assert "Efficiency vs NVIDIA H100" in text


# ---------------------------------------------------------------- the commands, end to end at tiny sizes
@pytest.fixture
def measured(tmp_path_factory):
    """`perfmodel measure --device cpu` on the tests' tiny sizes (real numpy, real clock; nothing timed is asserted)."""
    out = tmp_path_factory.mktemp("meas")
    mp = pytest.MonkeyPatch()
    mp.setattr(suite, "plan", lambda device, preset, cache=None, memory=None: suite._sizes(device, "tiny"))
    try:
        assert main(["measure", "--device", "cpu", "--quick", "--out", str(out)]) == 0
    finally:
        mp.undo()
    return out


def test_measure_writes_results_with_metadata_and_a_spec_every_command_accepts(measured, capsys):
    res = json.loads((measured / "results.json").read_text())
    meta = res["meta"]
    assert {"device", "numpy", "blas", "threads", "repeats", "warmup", "date_utc"} <= set(meta)
    fams = {r["family"] for r in res["cases"]}
    assert fams == set(C.FAMILIES)
    assert all(r["median_s"] > 0 and len(r["samples_s"]) == r["repeats"] for r in res["cases"])
    csv_lines = (measured / "results.csv").read_text().splitlines()
    assert len(csv_lines) == 1 + len(res["cases"]) and csv_lines[0].startswith("case,family,role,dtype,sizes")
    spec = yaml.safe_load((measured / "measured.yaml").read_text())
    assert "results.csv" in spec["memory_bandwidth"]["source"]
    capsys.readouterr()
    args = ["-m", str(measured / "decode-model.yaml"), "-H", str(measured / "measured.yaml"), "--weights-dtype", "fp32",
            "--act-dtype", "fp32", "--batch", "1,2", "--format", "json"]
    assert main(["decode", *args]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["batch"] for r in rows] == [1, 2] and all(r["latency_s"] > 0 for r in rows)


def test_validate_prints_the_exact_json_object_and_a_table_per_family(measured, capsys, tmp_path):
    assert main(["validate", str(measured), "--format", "json"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert set(j) == {"cases", "median_abs_error", "p90_abs_error"}
    assert {c["family"] for c in j["cases"]} == set(C.VALIDATION)
    assert all(set(c) == {"case", "family", "predicted_s", "measured_s", "error"} for c in j["cases"])
    png = tmp_path / "pv.png"
    assert main(["validate", str(measured / "results.json"), "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert png.stat().st_size > 0
    assert all(f in out for f in ("sweep", "attention", "decode", "median |error|", "p90 |error|"))


def test_a_decode_case_breaks_down_per_op_into_the_engine_prediction(measured, capsys):
    res = json.loads((measured / "results.json").read_text())
    hw = load_hardware(str(measured / "measured.yaml"))
    rec = next(r for r in res["cases"] if r["family"] == "decode")
    t = op_breakdown(res, hw, rec["case"])
    assert t["op"] == list(dict.fromkeys(o.name for o in C.case_ops(C.from_record(rec))[0]))
    assert t["predicted_s"].sum() == pytest.approx(C.predict(C.from_record(rec), hw))
    assert np.all(t["measured_s"] > 0)
    assert main(["validate", str(measured), "--ops", rec["case"], "--format", "json"]) == 0
    assert [r["op"] for r in json.loads(capsys.readouterr().out)] == t["op"]
    assert main(["validate", str(measured), "--ops", "sweep/none"]) == 2
    from perfmodel.measure import breakdown, validation

    assert breakdown(measured, rec["case"])["op"] == t["op"]
    assert rec["case"] in validation(measured / "results.json")["case"]
    from perfmodel.measure.validate import load_report  # what `perfmodel plot validation` draws

    assert set(load_report(measured)) == {"cases", "median_abs_error", "p90_abs_error", "device"}


def test_validate_rejects_what_is_not_a_results_file_in_one_line(tmp_path, capsys):
    bad = tmp_path / "r.json"
    bad.write_text("[1, 2]")
    for args in (["validate", str(tmp_path / "nope")], ["validate", str(bad)], ["measure", "--device", "tpu"]):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert err.startswith("perfmodel: error: ") and err.count("\n") == 1


def test_the_cpu_backend_describes_the_machine():
    info = CPUBackend().info()
    assert info["threads"] >= 1 and info["numpy"] == np.__version__ and info["device"]
