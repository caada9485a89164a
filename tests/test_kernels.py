"""Measured kernel tables (perfmodel/kernels.py): the achievable mode prices the ops a table covers at
max(r, 1) x their ideal time, says which source priced each op, and keeps the roofline a bound.

The AIConfigurator path needs the `kernels` extra (CI installs it); the interface itself is tested on a
`perfmodel measure` results.csv written here, which needs nothing beyond the default install."""
import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import perfmodel as pm
from perfmodel import engine, kernels
from perfmodel.cli import main
from perfmodel.ops import MATMUL, Layout, Op, Precision, build_ops
from perfmodel.specs import load_hardware, load_impl, load_model
from perfmodel.timemodel import TimeModel

AIC = kernels.aic_dir() is not None and (kernels.aic_dir() / "h100_sxm").is_dir()
needs_aic = pytest.mark.skipif(not AIC, reason="the kernels extra (aiconfigurator-core) is not installed")
H100 = load_hardware("h100-sxm")


# ---------------------------------------------------------------- interpolation
@given(st.floats(1.0, 1e5), st.floats(1.0, 1e5))
def test_interpolation_returns_the_measured_value_at_a_grid_point_and_stays_between_neighbours(x, y):
    ax = [np.array([1.0, 10.0, 100.0, 1e4]), np.array([2.0, 64.0])]
    vals = np.arange(8, dtype=float).reshape(4, 2) ** 1.5
    for i, a in enumerate(ax[0]):
        for j, b in enumerate(ax[1]):
            assert kernels._interp(ax, vals, [a, b]) == pytest.approx(vals[i, j], rel=1e-12)
    v = float(kernels._interp(ax, vals, [x, y]))
    assert vals.min() - 1e-9 <= v <= vals.max() + 1e-9  # a convex combination of the grid's values
    # outside the grid a coordinate is held at the edge
    assert kernels._interp(ax, vals, [1e9, 1e9]) == pytest.approx(vals[-1, -1])
    assert kernels._interp(ax, vals, [0.5, 1.0]) == pytest.approx(vals[0, 0])


@given(st.lists(st.floats(0.1, 1e6), min_size=3, max_size=3))
def test_one_point_is_interpolated_as_the_array_path_interpolates_it(q):
    # the scalar path (one serving step at a time) and the array path (runs of steps at once) are one function
    ax = [np.array([1.0, 10.0, 100.0, 1e4]), np.array([7.0]), np.array([2.0, 64.0, 512.0])]
    vals = np.random.default_rng(3).normal(size=(4, 1, 3))
    one = kernels._interp(ax, vals, q)
    arr = kernels._interp(ax, vals, [np.array([x, x]) for x in q])
    assert np.ndim(one) == 0 and arr.shape == (2,)
    assert float(one) == pytest.approx(float(arr[0]), rel=1e-12, abs=1e-12)


def test_the_nearest_measured_moe_shape_is_remembered_and_is_what_a_fresh_search_finds():
    ks = kernels.KernelSet(source="test")
    ax = [np.array([1.0, 64.0, 4096.0])]
    ks.moe["fp8"] = {(4096, 1536, 8, 128, 1, 1): (ax, np.log(np.array([3.0, 2.0, 1.5]))),
                     (7168, 2048, 8, 256, 1, 8): (ax, np.log(np.array([5.0, 4.0, 2.5])))}
    shape = (7000, 2000, 8, 256, 1, 8)
    first = ks.moe_ratio("fp8", shape, 64.0)
    assert first == pytest.approx(4.0) and ("moe", ("fp8",), shape, None) in ks._near
    assert ks.moe_ratio("fp8", shape, 64.0) == first
    fresh = kernels.KernelSet(source="test", moe=ks.moe)
    assert fresh.moe_ratio("fp8", (4000, 1500, 8, 128, 1, 1), 64.0) == pytest.approx(2.0)
    assert fresh.moe_ratio("bf16", shape, 64.0) is None


def _affine_tables(hw, a, b, tps=(1, 2, 4), eps=(), base=(4096, 1536, 8, 128), dt="fp8"):
    """fp8 MoE tables whose kernel takes a + b x seconds (x: the ideal) at tp in tps (ep 1), and the ep-1 kernel's
    time at ep in eps (tp 1: as vLLM's tables time an ep split)"""
    from perfmodel.kernel_set import _ideal_moe

    ks = kernels.KernelSet(source="test")
    n = np.array([1.0, 64.0, 4096.0])
    tab = ks.moe.setdefault(dt, {})
    for tp in tps:
        x = _ideal_moe(hw, dt, n, *base, tp, 1)
        tab[(*base, tp, 1)] = ([n], np.log((a + b * x) / x))
    for ep in eps:
        t1 = a + b * _ideal_moe(hw, dt, n, *base, 1, 1)
        tab[(*base, 1, ep)] = ([n], np.log(t1 / _ideal_moe(hw, dt, n, *base, 1, ep)))
    return ks, n


@pytest.mark.parametrize("eps", [(), (2, 4, 8)])
def test_a_moe_shape_the_tables_lack_costs_the_fixed_part_plus_the_slope_of_its_measured_tp_siblings(eps):
    """A fused MoE step is several kernels with a fixed cost that no tp split shrinks: at a tp the tables lack,
    t = a + b x (x its ideal) fitted over the nearest shape's tp siblings, not the nearest's ratio r x. vLLM's
    ep siblings, timed at the ep-1 kernel's time, do not enter a tp query's fit."""
    from perfmodel.kernel_set import _ideal_moe

    hw = pm.load_hardware("h100-sxm")
    a, b = 30e-6, 1.6
    ks, n = _affine_tables(hw, a, b, eps=eps)
    for tp in (8, 16, 3):  # beyond the measured tps, and between two
        q = (4096, 1536, 8, 128, tp, 1)
        x = _ideal_moe(hw, "fp8", n, *q)
        assert ks.moe_ratio("fp8", q, n, hw=hw) * x == pytest.approx(a + b * x, rel=1e-9)
        xn = _ideal_moe(hw, "fp8", n, 4096, 1536, 8, 128, 4, 1)  # without the device: the nearest's (tp 4) r
        assert ks.moe_ratio("fp8", q, n) == pytest.approx((a + b * xn) / xn, rel=1e-9)
    # a measured shape keeps its own r
    m = (4096, 1536, 8, 128, 2, 1)
    x = _ideal_moe(hw, "fp8", n, *m)
    assert ks.moe_ratio("fp8", m, n, hw=hw) == pytest.approx((a + b * x) / x, rel=1e-9)
    # another base shape transfers the law of the nearest base: the same a, the same b
    q = (5120, 1536, 8, 128, 8, 1)
    x = _ideal_moe(hw, "fp8", n, *q)
    assert ks.moe_ratio("fp8", q, n, hw=hw) * x == pytest.approx(a + b * x, rel=1e-9)


def _law_tables(hw, rows, base=(4096, 1536, 8, 128), dt="fp8"):
    """fp8 MoE tables of `base` at each (tp, ep, a, b) of rows: the kernel takes a + b x seconds (x: its ideal)"""
    from perfmodel.kernel_set import _ideal_moe

    ks = kernels.KernelSet(source="test")
    n = np.array([1.0, 64.0, 4096.0])
    for tp, ep, a, b in rows:
        x = _ideal_moe(hw, dt, n, *base, tp, ep)
        ks.moe.setdefault(dt, {})[(*base, tp, ep)] = ([n], np.log((a + b * x) / x))
    return ks, n


def test_a_moe_fit_takes_the_siblings_along_the_axis_the_query_moves_on():
    """tp siblings for a query at another tp, ep siblings for one at another ep, each with its own law; where the
    held axis has one measured shape (the nearest itself), every sibling of the base shape"""
    from perfmodel.kernel_set import _ideal_moe

    hw = pm.load_hardware("h100-sxm")
    B = (4096, 1536, 8, 128)
    x = {k: _ideal_moe(hw, "fp8", np.array([1.0, 64.0, 4096.0]), *B, *k) for k in ((1, 1), (1, 16), (8, 1), (8, 4))}
    a, b, b2 = 30e-6, 1.6, 1.2  # the ep law a + b x; the tp law's slope b2, its line through the same tp-1 ep-1 time
    x11 = _ideal_moe(hw, "fp8", np.array([1.0, 64.0, 4096.0]), *B, 1, 1)
    ep_rows = [(1, e, a, b) for e in (2, 4, 8)]
    a2_at = a + (b - b2) * x11
    assert np.all(a2_at > a)
    ks, n = _law_tables(hw, ep_rows + [(1, 1, a, b), (2, 1, a2_at, b2), (4, 1, a2_at, b2)])
    q = (*B, 1, 16)  # nearest (1, 8): tp held, the ep siblings' line
    assert ks.moe_ratio("fp8", q, n, hw=hw) * x[(1, 16)] == pytest.approx(a + b * x[(1, 16)], rel=1e-9)
    q = (*B, 8, 1)  # nearest (4, 1): ep held, the tp siblings' line
    assert ks.moe_ratio("fp8", q, n, hw=hw) * x[(8, 1)] == pytest.approx(a2_at + b2 * x[(8, 1)], rel=1e-9)
    # two tp siblings and three ep ones timed at the ep-1 kernel's time (vLLM's): the two alone make the line
    ks, n = _affine_tables(hw, a, b, tps=(2, 4), eps=(2, 4, 8))
    assert ks.moe_ratio("fp8", (*B, 8, 1), n, hw=hw) * x[(8, 1)] == pytest.approx(a + b * x[(8, 1)], rel=1e-9)
    # the nearest (8, 2) alone at tp 8: the whole base's line
    ks, n = _law_tables(hw, [(1, 1, a, b), (2, 1, a, b), (8, 2, a, b)])
    assert ks.moe_ratio("fp8", (*B, 8, 4), n, hw=hw) * x[(8, 4)] == pytest.approx(a + b * x[(8, 4)], rel=1e-9)


def test_a_moe_fit_off_its_line_minimizes_the_relative_error_of_the_siblings():
    """siblings that are not on one line: a and b are the least squares in relative error, (t_fit - t) / t, the
    small slices weighing as much as the large (numpy's polyfit weighted by 1 / t as the independent check)"""
    from perfmodel.kernel_set import _ideal_moe

    hw = pm.load_hardware("h100-sxm")
    B = (4096, 1536, 8, 128)
    ks, n = _law_tables(hw, [(tp, 1, 30e-6 * f, 1.5 * f) for tp, f in ((1, 1.0), (2, 1.08), (4, 0.93), (8, 1.05))])
    xs = np.stack([_ideal_moe(hw, "fp8", n, *B, tp, 1) for tp in (1, 2, 4, 8)])
    ts = np.stack([np.exp(ks.moe["fp8"][(*B, tp, 1)][1]) for tp in (1, 2, 4, 8)]) * xs
    xq = _ideal_moe(hw, "fp8", n, *B, 16, 1)
    got = ks.moe_ratio("fp8", (*B, 16, 1), n, hw=hw) * xq
    for j in range(n.size):
        b, a = np.polyfit(xs[:, j], ts[:, j], 1, w=1.0 / ts[:, j])
        assert a > 0 and b > 0
        assert got[j] == pytest.approx(a + b * xq[j], rel=1e-9)
        plain_b, plain_a = np.polyfit(xs[:, j], ts[:, j], 1)  # unweighted: another answer, so the weights matter
        assert abs(plain_a + plain_b * xq[j] - got[j]) > 1e-3 * got[j]
    # a measured shape off the line keeps its own time
    own = ks.moe_ratio("fp8", (*B, 2, 1), n, hw=hw) * xs[1]
    assert own == pytest.approx(ts[1], rel=1e-12)


def test_a_long_run_of_token_counts_is_priced_as_each_count_alone():
    """the serving path hands moe_ratio thousands of token counts, fitted once per distinct count"""
    hw = pm.load_hardware("h100-sxm")
    ks, _ = _law_tables(hw, [(tp, 1, 30e-6 * f, 1.5 * f) for tp, f in ((1, 1.0), (2, 1.08), (4, 0.93))])
    rng = np.random.default_rng(2)
    whole = rng.integers(0, 600, size=(3, 100)).astype(float)
    whole[0, :3] = (0.0, 1.0, 2.0)
    q = (4096, 1536, 8, 128, 8, 1)
    for n in (whole, whole + 0.5, np.where(rng.random(whole.shape) < 0.5, whole, whole + 0.25)):  # whole, not whole
        run = ks.moe_ratio("fp8", q, n, hw=hw)
        assert run.shape == n.shape
        one = np.array([float(ks.moe_ratio("fp8", q, np.array([t]), hw=hw)[0]) for t in n.ravel()])
        assert np.allclose(run.ravel(), one, rtol=1e-12, atol=0)


def test_a_moe_fit_without_a_fixed_part_or_with_one_sibling_keeps_the_nearest_ratio():
    from perfmodel.kernel_set import _ideal_moe

    hw = pm.load_hardware("h100-sxm")
    q = (4096, 1536, 8, 128, 8, 1)
    for ks, n, near in (_affine_tables(hw, 30e-6, 1.6, tps=(4,)) + (4,),  # one sibling: no line
                        _affine_tables(hw, -2e-6, 1.6) + (4,)):  # a < 0 (superlinear in the slice)
        xn = _ideal_moe(hw, "fp8", n, 4096, 1536, 8, 128, near, 1)
        r_near = np.exp(ks.moe["fp8"][(4096, 1536, 8, 128, near, 1)][1])
        assert ks.moe_ratio("fp8", q, n, hw=hw) == pytest.approx(r_near, rel=1e-12)
        assert np.all(np.isfinite(r_near)) and xn.shape == n.shape


@pytest.mark.parametrize("axes", ["one object", "equal copies", "another axis", "two points"])
def test_the_moe_siblings_rows_are_interpolated_as_each_grid_alone(axes):
    from perfmodel.kernel_set import _interp_rows

    rng = np.random.default_rng(5)
    ax = np.array([1.0, 8.0, 64.0, 4096.0]) if axes != "two points" else np.array([1.0, 512.0])
    other = {"one object": ax, "equal copies": ax.copy(), "another axis": np.array([1.0, 16.0, 128.0, 2048.0]),
             "two points": ax.copy()}[axes]
    grids = [([ax], rng.normal(size=ax.size)), ([other], rng.normal(size=other.size)), ([ax], rng.normal(size=ax.size))]
    for n in (np.array([0.5, 1.0, 3.0, 64.0, 1000.0, 1e5]), np.float64(17.0)):
        want = np.stack([kernels._interp(*g, [n]) + np.zeros(np.shape(n)) for g in grids])
        assert np.allclose(_interp_rows(grids, n), want, rtol=1e-12, atol=0)


def test_holes_in_a_table_are_filled_from_their_measured_neighbours():
    import pandas as pd

    df = pd.DataFrame({"a": [1, 1, 2, 2, 4], "b": [1, 2, 1, 2, 1]})
    ax, cube = kernels._grid(df, ["a", "b"], np.array([1.0, 2.0, 3.0, 4.0, 5.0]))
    assert cube.shape == (3, 2) and not np.isnan(cube).any()
    assert cube[2, 1] == pytest.approx((4.0 + 5.0) / 2)  # (4, 2) was not measured: its neighbours (2, 2) and (4, 1)


def test_a_version_is_picked_as_the_same_else_the_newest_not_newer():
    have = ["0.5.6.post2", "0.5.10", "0.5.14"]
    assert kernels.pick_version(have, "0.5.14") == "0.5.14"
    assert kernels.pick_version(have, "0.5.12") == "0.5.10"  # numeric, not string, order
    assert kernels.pick_version(have, "0.4.0") == "0.5.6.post2"  # nothing older: the oldest measured
    assert kernels.pick_version([], "1.0") is None


# ---------------------------------------------------------------- a results.csv of perfmodel measure
def _results_csv(tmp_path, hw, rows):
    """rows: (M, N, K, ratio to the ideal time); written as `perfmodel measure` writes its gemm rows."""
    lines = ["case,family,role,dtype,sizes,flops,bytes,median_s"]
    for M, N, K, r in rows:
        t = r * float(kernels._ideal_gemm(hw, "bfloat16", M, N, K))
        lines.append(f"gemm/bf16/{M}x{N}x{K},gemm,validation,bf16,M={M} N={N} K={K},{2 * M * N * K},0,{t!r}")
    p = tmp_path / "results.csv"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_a_measured_gemm_is_its_ratio_to_the_ideal_time_times_the_ops_own_ideal_time(tmp_path):
    rows = [(m, n, k, 1.5 + 0.25 * i) for i, (m, n, k) in
            enumerate((m, n, k) for m in (1, 64) for n in (1024, 4096) for k in (1024, 4096))]
    path = _results_csv(tmp_path, H100, rows)
    impl = dataclasses.replace(load_impl("graphs"), kernel_tables=str(path))
    tm = TimeModel.achievable(H100, impl)
    assert tm.kernels_table is not None and tm.kernels_table.source == str(path)
    for m, n, k, r in rows:  # at a measured shape the measured time comes back exactly
        op = Op("mlp_down", "", 1, MATMUL, flops=2.0 * m * n * k, w_read=2.0 * n * k, act_read=2.0 * m * k,
                act_write=2.0 * m * n, wfmt="bf16")
        op.gemm = (float(m), float(n), 1.0)
        src = []
        ((tc, tmem, t, *_),) = tm.price([op], H100, Precision(), sources=src)
        ideal = max(op.flops / H100.peak("bf16"), op.bytes / H100.memory_bandwidth)
        assert t == pytest.approx(r * ideal, rel=1e-9) and src == [str(path)]
    # an op no table covers (a weight-only int4 GEMM) keeps the datasheet model, and says so
    op = Op("mlp_down", "", 1, MATMUL, flops=2.0 * 4096 * 4096, w_read=0.5 * 4096 * 4096, wfmt="int4-g128")
    op.gemm = (1.0, 4096.0, 1.0)
    src = []
    tm.price([op], H100, Precision("int4-g128"), sources=src)
    assert src == ["datasheet"]


def test_the_decode_table_and_the_per_op_table_say_what_was_measured(tmp_path):
    rows = [(m, n, k, 2.0) for m in (1, 16, 256) for n in (1024, 14336) for k in (1024, 14336)]
    path = _results_csv(tmp_path, H100, rows)
    sets = {"impl.kernel_tables": str(path)}
    t = pm.decode("llama-3.1-8b", "h100-sxm", batch=[1, 64], context=1024, mode="achievable", sets=sets)
    assert ((t.measured_share > 0.3) & (t.measured_share < 1.0)).all()  # GEMMs measured; attention, norms not
    plain = pm.decode("llama-3.1-8b", "h100-sxm", batch=[1, 64], context=1024, mode="achievable")
    assert (plain.measured_share == 0).all()
    ops = pm.intensity("llama-3.1-8b", "h100-sxm", 8, 1024, mode="achievable", sets=sets)
    by = dict(zip(ops.op[ops.phase == "decode"], ops.priced_by[ops.phase == "decode"]))
    assert by["mlp_down"] == str(path) and by["attn_qk"] == "datasheet" and by["attn_norm"] == "datasheet"


def test_a_bad_kernel_table_is_one_line_naming_it(tmp_path, capsys):
    assert main(["decode", "--mode", "achievable", "--set", f"impl.kernel_tables={tmp_path / 'nope.csv'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nope.csv" in err and "results.csv" in err
    empty = tmp_path / "results.csv"
    empty.write_text("case,family,role,dtype,sizes,flops,bytes,median_s\n")
    with pytest.raises(pm.SpecError, match="no GEMM rows"):
        pm.decode("llama-3.1-8b", "h100-sxm", mode="achievable", sets={"impl.kernel_tables": str(empty)})


def test_a_profile_names_its_engine_as_name_and_version(tmp_path):
    assert (load_impl("vllm-0.24").engine, load_impl("vllm-0.24").engine_version) == ("vllm", "0.24.0")
    bad = tmp_path / "x.yaml"
    bad.write_text("base: graphs\nname: x\nengine: {value: tgi 1.0, source: s}\n")
    with pytest.raises(pm.SpecError, match="engine"):
        load_impl(str(bad))


def test_without_the_extra_nothing_is_measured_and_the_footer_says_why(monkeypatch, tmp_path):
    monkeypatch.setenv("PERFMODEL_AIC_DATA", str(tmp_path / "absent"))
    assert kernels.aic_dir() is None
    tm = TimeModel.achievable(H100, load_impl("vllm-0.24"))
    assert tm.kernels_table is None
    from perfmodel.cli.common import kernels_note

    assert "not installed" in kernels_note(H100, load_impl("vllm-0.24"))


# ---------------------------------------------------------------- the engine's step loop
def test_an_overlapped_step_loop_hides_under_the_gpu_until_it_is_the_longer():
    """step = max(device, launches + host_step + host_per_seq * n) + step_overhead + step_per_seq * n."""
    tm = dataclasses.replace(TimeModel.roofline(), mode="achievable", host_step=3e-4, host_per_seq=1e-4)
    host_bound = []
    for B in (1.0, 16.0, 256.0):
        ops = build_ops(load_model("llama-3.1-8b"), B, 1.0, 1024.0, "decode", Precision())
        r = engine.roofline(ops, H100, Precision(), tm=tm)
        assert r["time"] == pytest.approx(max(r["device_time"], 3e-4 + 1e-4 * B), rel=1e-12)
        host_bound.append(3e-4 + 1e-4 * B > r["device_time"])
    assert host_bound == [False, False, True]  # both sides of the max are taken
    ops = build_ops(load_model("llama-3.1-8b"), 8.0, 1.0, 1024.0, "decode", Precision())
    sync = dataclasses.replace(TimeModel.roofline(), mode="achievable", step_overhead=3e-4, step_per_seq=1.8e-5)
    r = engine.roofline(ops, H100, Precision(), tm=sync)
    assert r["time"] == pytest.approx(r["device_time"] + 3e-4 + 1.8e-5 * 8, rel=1e-12)


EAGER_KINDS = ["llama-2-13b", "llama-3.1-8b", "llama-2-13b-mla", "llama-2-13b-cla2", "llama-2-13b-swa",
               "llama-2-13b-hybrid", "llama-2-13b-linear", "mixtral-8x7b", "deepseek-v2-lite"]


@pytest.mark.parametrize("name", EAGER_KINDS)
def test_a_step_with_a_prompt_run_outside_cuda_graphs_costs_its_ops_host_time_and_a_decode_step_does_not(name):
    """prefill_launch: in a step that holds a prompt every kernel-launching op costs that much host time, under
    max() with the device time; decode steps (replayed CUDA graphs) do not pay it. For every model kind."""
    m = load_model(name)
    base = dataclasses.replace(TimeModel.roofline(), mode="achievable", host_step=3e-4)
    eager = dataclasses.replace(base, prefill_launch=68e-6)
    pre = build_ops(m, 1.0, 16.0, 16.0, "prefill", Precision())
    n_ops = sum(op.count for op in pre)  # one kernel each: roofline's kernel table is empty
    r0, r1 = (engine.roofline(pre, H100, Precision(), tm=t) for t in (base, eager))
    assert r1["host_time"] == pytest.approx(r0["host_time"] + 68e-6 * n_ops, rel=1e-12)
    assert r1["time"] == pytest.approx(max(r1["device_time"], r1["host_time"]), rel=1e-12)
    assert r1["time"] >= 68e-6 * n_ops and r1["device_time"] == r0["device_time"]
    dec = build_ops(m, 8.0, 1.0, 1024.0, "decode", Precision())
    d0, d1 = (engine.roofline(dec, H100, Precision(), tm=t)["time"] for t in (base, eager))
    assert d1 == d0


def test_sglang_prices_a_short_prompt_at_its_eager_host_floor_and_the_roofline_never_pays_it():
    """sglang-0.5: DeepSeek-V3 on 8 H200, one 128-token prompt: 1,213 ops x 68 us = 82.5 ms of launches (the
    device needs about 30 ms); an 8,192-token prompt is device-bound; decode and the roofline are unchanged."""
    ops = dict(model="deepseek-v3", hardware="h200", tp=8, weights_dtype="fp8-b128", act_dtype="fp8", kv_dtype="fp8")
    t = pm.prefill(**ops, context=[128, 8192], mode="achievable", impl="sglang-0.5")
    assert 82.5e-3 <= t.latency_s[0] < 84e-3
    no = pm.prefill(**ops, context=[128, 8192], mode="achievable", impl="sglang-0.5", sets={"impl.prefill_launch": "0 s"})
    assert no.latency_s[0] < 0.5 * t.latency_s[0] and no.latency_s[1] == pytest.approx(t.latency_s[1], rel=1e-9)
    roof = pm.prefill(**ops, context=[128], mode="roofline")
    assert roof.latency_s[0] < no.latency_s[0]
    d = pm.decode(**ops, batch=[8], context=[1024], mode="achievable", impl="sglang-0.5")
    d0 = pm.decode(**ops, batch=[8], context=[1024], mode="achievable", impl="sglang-0.5", sets={"impl.prefill_launch": "0 s"})
    assert d.latency_s[0] == d0.latency_s[0]


@needs_aic
def test_trtllm_prices_a_step_with_a_context_request_at_its_profiled_host_time_and_its_decode_steps_replay_graphs():
    """trtllm-1.3: TensorRT-LLM runs a step with a context request outside its CUDA graphs. gpt-oss-120b on 2 B200s,
    one 886-token prompt: its 437 kernel-launching ops x 69 us = 30.2 ms of host time, the forward's CPU time that
    aisimulate#277 profiled (about 30 ms), above the ~8 ms its kernels take; an 8,192-token prompt is device-bound.
    A mixed step (the prompt and 3 decode rows) pays the same floor; a decode step and the roofline do not."""
    ops = dict(model="gpt-oss-120b", hardware="b200", tp=2, weights_dtype="nvfp4", act_dtype="fp4", kv_dtype="fp8")
    t = pm.prefill(**ops, context=[886, 8192], mode="achievable", impl="trtllm-1.3")
    no = pm.prefill(**ops, context=[886, 8192], mode="achievable", impl="trtllm-1.3",
                    sets={"impl.prefill_launch": "0 s"})
    assert 29.5e-3 <= t.latency_s[0] <= 31e-3 and no.latency_s[0] < 0.5 * t.latency_s[0]
    assert no.latency_s[1] == pytest.approx(t.latency_s[1], rel=1e-9)
    assert pm.prefill(**ops, context=[886], mode="roofline").latency_s[0] < no.latency_s[0]
    m, hw, ip = load_model("gpt-oss-120b"), load_hardware("b200"), load_impl("trtllm-1.3")
    prec = Precision("nvfp4", "fp4", "fp8")
    mixed = engine.mixed_step(m, hw, [886, 1, 1, 1], [886, 900, 950, 1000], prec, layout=Layout(tp=2),
                              mode="achievable", impl=ip)
    assert mixed["latency_s"] >= 437 * 69e-6
    d = [pm.decode(**ops, batch=[8], context=[1024], mode="achievable", impl="trtllm-1.3", sets=s).latency_s[0]
         for s in (None, {"impl.prefill_launch": "0 s"})]
    assert d[0] == d[1]


def test_an_impl_profile_s_prefill_launch_is_a_time_and_a_bad_one_is_named(tmp_path):
    from perfmodel.efficiency import impl_from_dict
    from perfmodel.errors import SpecError

    base = dict(name="x", source="test", launch="0 s", layer_overhead="0 s", step_overhead="0 s",
                kernels={"value": {"attn_av": 0}, "source": "test"}, collectives=["ring"])
    assert impl_from_dict(dict(base, prefill_launch="68 us"), "x.yaml").prefill_launch == pytest.approx(68e-6)
    assert impl_from_dict(base, "x.yaml").prefill_launch == 0.0
    with pytest.raises(SpecError, match="prefill_launch"):
        impl_from_dict(dict(base, prefill_launch="-1 us"), "x.yaml")


# ---------------------------------------------------------------- physics
def test_attention_computes_in_its_own_dtype_not_the_gemms():
    """fp8 GEMMs with a 16-bit cache: attention runs at the 16-bit rate (it was priced at fp8: 315 -> 168 ms)."""
    m = load_model("qwen3-235b-a22b")
    for kv, key in (("bf16", "bf16"), ("fp8", "fp8")):
        prec = Precision("fp8", kv, "fp8")
        ops = build_ops(m, 1.0, 4096.0, 4096.0, "prefill", prec)
        for op, (tc, *_) in zip(ops, TimeModel.roofline().price(ops, H100, prec)):
            if op.name == "attn_qk":
                assert tc == pytest.approx(op.flops / H100.peak(key), rel=1e-12)


# every attention kind of the catalog: MHA, GQA, MLA, CLA, windows, linear, MoE
KINDS = ["llama-2-13b", "llama-3.1-8b", "deepseek-v3", "qwen3-30b-a3b", "gemma-3-27b", "gpt-oss-20b",
         "qwen3.5-397b-a17b", "mixtral-8x7b"]


@pytest.mark.parametrize("name", KINDS)
@pytest.mark.parametrize("impl", ["graphs", pytest.param("vllm-0.24", marks=needs_aic)])
def test_the_roofline_stays_a_bound_with_measured_kernels(name, impl):
    try:
        m = load_model(name)
    except pm.SpecError:
        pytest.skip(f"{name} not in the catalog")
    for phase in ("decode", "prefill"):
        B, S = np.array([[1.0], [8.0], [64.0]]), np.array([[256.0, 4096.0]])
        roof = engine.evaluate(m, H100, B, S, phase, "roofline")["latency_s"]
        ach = engine.evaluate(m, H100, B, S, phase, "achievable", impl=impl)["latency_s"]
        assert np.all(ach >= roof * (1 - 1e-12)), (phase, ach / roof)


@pytest.mark.parametrize("name", KINDS)
def test_one_more_sequence_moves_achievable_time_by_at_most_the_tile_it_crosses(name):
    """Continuity: with stream-K no partial wave is charged, so B -> B + 1 grows a GEMM's work by at most the
    row padding of the tile boundary it crosses (64-row tiles; 16-row blocks for weight-only kernels)."""
    try:
        m = load_model(name)
    except pm.SpecError:
        pytest.skip(f"{name} not in the catalog")
    B = np.arange(1.0, 200.0)
    for wdt, tile in (("bf16", 64.0), ("int4-g128", 16.0)):
        prec = Precision(wdt)
        t = engine.evaluate(m, H100, B, 512.0, "decode", "achievable", prec, grid=False)["latency_s"]
        pad = lambda b: np.where(b < tile, b, np.ceil(b / tile) * tile)  # noqa: E731
        bound = np.maximum(pad(B[1:]) / pad(B[:-1]), B[1:] / B[:-1])
        assert np.all(t[1:] / t[:-1] <= bound + 1e-9), (wdt, float(np.max(t[1:] / t[:-1] / bound)))


@needs_aic
@pytest.mark.parametrize("impl", ["vllm-0.24", "trtllm-1.3", "sglang-0.5"])
@pytest.mark.parametrize("name", KINDS)
def test_a_chunk_over_a_long_cache_grows_with_its_tokens_and_two_tokens_cost_at_most_two_decode_steps(name, impl):
    """Continuity over a chunk's tokens: T new tokens after a cache of 8,192 - T, on 8 H200s with each engine's
    measured kernels. The context tables measure prompts with no prefix; looked up at L = T, a 2-token chunk took
    the ratio of a 2-token prompt (launch-bound) times its 8,192-key work: 2.3 s for DeepSeek, 30x a decode step,
    and the step got faster as T grew. Now one row's step never falls by more than 7% from T to a larger T (the
    tables' own noise and the GEMM shapes they measure: the largest, 6.2%, is vLLM 0.24's measured Mixtral MoE kernel,
    2,587 us over 32 layers at 48 tokens and 2,301 us at 64) and T = 2 costs at most two T = 1 steps. SGLang runs a step
    with a prompt outside its CUDA graphs (prefill_launch: a host floor of its ops' launches, tested on its own
    above): the law is on the priced kernels, so its profile runs here without that floor."""
    m, hw, ip = load_model(name), load_hardware("h200"), dataclasses.replace(load_impl(impl), prefill_launch=0.0)
    Ts = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128, 256]
    for kv in ("bf16", "fp8"):
        t = np.array([engine.mixed_step(m, hw, [T], [8192], Precision("bf16", "bf16", kv), layout=Layout(tp=8),
                                        mode="achievable", impl=ip)["latency_s"] for T in Ts])
        assert t[1] <= 2.0 * t[0], (kv, t[1] / t[0])
        later = np.minimum.accumulate(t[:0:-1])[::-1]  # the least of t(T') over T' >= T, for T >= 2
        assert np.all(later[1:] >= 0.93 * t[1:-1]), (kv, float(np.min(later[1:] / t[1:-1])))


def test_the_issue_cliff_is_now_what_a_16_row_block_explains():
    """llama-3.1-70b int4-g128 on H100 at batch 64 -> 65 jumped +53% (wave quantization, 64-row tiles)."""
    t = pm.decode("llama-3.1-70b", "h100-sxm", batch=[64, 65], context=128, weights_dtype="int4-g128",
                  mode="achievable").latency_s.to_numpy()
    assert t[1] / t[0] - 1 <= 80 / 64 * 65 / 64 - 1


# ---------------------------------------------------------------- AIConfigurator's tables (the extra)
@needs_aic
def test_aiconfigurator_tables_price_gemm_attention_moe_and_allreduce_on_h100():
    ks = kernels.load(H100, "vllm", "0.24.0")
    assert ks is not None and ks.source.startswith("AIConfigurator") and "h100_sxm" in ks.source
    assert {"bfloat16", "fp8"} <= set(ks.gemm) and ks.gen_attn and ks.ctx_attn and ks.moe and ks.allreduce
    # a measured 4096^3 bf16 GEMM: within 1% of the table's own row (0.166 ms in 0.24.0)
    r = float(ks.gemm_ratio("bfloat16", 4096, 4096, 4096))
    assert r * float(kernels._ideal_gemm(H100, "bfloat16", 4096, 4096, 4096)) == pytest.approx(0.166026e-3, rel=0.01)
    # a measured GEMM beats its datasheet bound (r < 1) only where all its operands fit the L2 cache (50 MiB):
    # a benchmark that reruns one shape reads them from L2, not HBM (pricing clamps r at 1)
    for dt, (ax, logr) in ks.gemm.items():
        m, n, k = np.meshgrid(*ax, indexing="ij")
        b = kernels._BYTES[dt]
        fits_l2 = m * k * b + k * n * b + m * n * 2.0 <= H100.l2_cache
        assert np.all((np.exp(logr) >= 0.999) | fits_l2), dt


@needs_aic
def test_moe_is_priced_by_tokens_per_expert_and_engines_differ():
    qm = load_model("qwen3-30b-a3b")
    lat = {}
    for impl in ("vllm-0.24", "sglang-0.5", "trtllm-1.3"):
        t = engine.evaluate(qm, H100, np.array([1.0, 8.0, 64.0, 256.0]), 2048.0, "decode", "achievable",
                            impl=impl, grid=False)
        assert np.all(t["measured_share"] > 0.5)
        lat[impl] = t["latency_s"]
        # per token, a bigger batch shares the experts' weights: time per sequence falls with B
        assert np.all(np.diff(t["latency_s"] / np.array([1.0, 8.0, 64.0, 256.0])) < 0)
    assert not np.allclose(lat["vllm-0.24"], lat["trtllm-1.3"])


@needs_aic
def test_the_cli_footer_names_the_measured_tables(capsys):
    assert main(["decode", "-m", "llama-3.1-8b", "--mode", "achievable", "--impl", "vllm-0.24"]) == 0
    out = capsys.readouterr().out
    assert "measured kernels from AIConfigurator" in out and "measured_share" in out
    assert math.isfinite(float(out.split("\n")[2].split()[-1]))


def test_an_ep_all_to_all_costs_deepeps_measured_latency_not_a_one_step_peer_copy():
    """The EP all-to-all runs in DeepEP's kernels (13.2 us dispatch, 14.4 us combine for one token per rank on
    8 H100s, AIConfigurator's measurement), where a one-step peer copy was priced at 5.9 us."""
    m = load_model("deepseek-v3")
    from perfmodel.ops import Layout

    lay = Layout(ep=8)
    ops = [op for op in build_ops(m, 1.0, 1.0, 1024.0, "decode", Precision(), layout=lay) if op.coll == "alltoall"]
    tm = TimeModel.achievable(H100, load_impl("graphs"))
    for op, (_, _, t, *_) in zip(ops, tm.price(ops, H100, Precision(), lay)):
        assert t >= 13.8e-6 and t == pytest.approx(13.8e-6 + 7 / 8 * op.msg / (0.473 * 450e9), rel=1e-3)


def test_one_accumulate_rule_picks_the_rtx_4090s_fp16_peak_everywhere():
    """GeForce runs fp16 GEMMs at 330.3 TF with FP16 accumulate and 165.2 TF with FP32 accumulate. The roofline (a
    bound) takes the faster; the achievable mode the rate of what its profile accumulates in."""
    hw = load_hardware("rtx-4090")
    prec = Precision("fp16", "fp16", "fp16")
    op = Op("mlp_down", "", 1, MATMUL, flops=2.0 * 8192 ** 3, w_read=2.0 * 8192 ** 2, wfmt="fp16")
    op.gemm = (8192.0, 8192.0, 1.0)
    ((tc, *_),) = TimeModel.roofline().price([op], hw, prec)
    assert tc == pytest.approx(op.flops / 330.3e12)
    e = hw.achievable.gemm_efficiency["fp16"]
    for impl, peak in (("graphs", 165.2e12), ("eager-fused", 330.3e12)):
        tm = TimeModel.achievable(hw, load_impl(impl))
        ((tc, *_),) = tm.price([op], hw, prec)
        assert tc == pytest.approx(op.flops / (peak * e * tm.shape_efficiency(op.gemm))), impl
    ((tc, *_),) = TimeModel.roofline().price([op], hw, Precision())  # bf16 has only the FP32-accumulate rate
    assert tc == pytest.approx(op.flops / 165.2e12)
    from perfmodel.measure.published import load_cases

    assert not any(k.startswith("peak_flops") for c in load_cases(None) for k in (c.sets or {})), \
        "a published case overrides a peak instead of following the rule"


def test_built_tables_are_kept_on_disk_and_a_broken_entry_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFMODEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(kernels, "_CACHE", {})
    rows = [(m, n, k, 1.5) for m in (1, 64) for n in (1024, 4096) for k in (1024, 4096)]
    path = _results_csv(tmp_path, H100, rows)
    first = kernels.load(H100, None, None, str(path))
    files = list((tmp_path / "cache").glob("kernels-*.pkl"))
    assert len(files) == 1
    monkeypatch.setattr(kernels, "_CACHE", {})
    again = kernels.load(H100, None, None, str(path))  # read back from disk
    assert again is not first and float(again.gemm_ratio("bfloat16", 64, 4096, 4096)) == pytest.approx(1.5)
    files[0].write_bytes(b"not a pickle")
    monkeypatch.setattr(kernels, "_CACHE", {})
    rebuilt = kernels.load(H100, None, None, str(path))
    assert float(rebuilt.gemm_ratio("bfloat16", 1, 1024, 1024)) == pytest.approx(1.5)
    # an entry pickled before a field was added (the MoE fits' memo, seventeenth session) is rebuilt, not used
    import pickle

    old = kernels.KernelSet(source="an older build")
    del old.__dict__["_fits"]
    files[0].write_bytes(pickle.dumps(old))
    monkeypatch.setattr(kernels, "_CACHE", {})
    again = kernels.load(H100, None, None, str(path))
    assert again.source != "an older build" and again._fits == {}


@needs_aic
@pytest.mark.parametrize("name", ["llama-2-13b", "llama-3.1-8b", "gemma-3-27b", "qwen3-30b-a3b", "mixtral-8x7b"])
def test_with_measured_kernels_one_more_token_moves_time_by_at_most_a_tile_boundary(name):
    """The measured tables have rows on both sides of every tile boundary (m = 16, 17, 32, 33, ..., 128, 129):
    B -> B + 1 (decode) or S -> S + 1 (prefill) moves the time by at most the 16-row block it crosses (or, for an
    MoE layer, the experts the extra token reaches: ops._touched's law), within the tables' own repeatability:
    5% (H100 bf16 n = k = 4096, m = 1..16: 15.05 to 15.72 us, one kernel at one shape, 4.5% apart)."""
    m = load_model(name)
    def step(x):  # the larger of the 16-row and the 64-row tile growth (below 16 rows: skinny, unpadded)
        p16 = lambda b: np.where(b < 16, b, np.ceil(b / 16) * 16)  # noqa: E731
        p64 = lambda b: np.where(b < 16, b, np.ceil(b / 64) * 64)  # noqa: E731
        return np.maximum.reduce([p16(x[1:]) / p16(x[:-1]), p64(x[1:]) / p64(x[:-1]), x[1:] / x[:-1]])

    noise = 1.05
    B = np.arange(1.0, 300.0)
    reach = np.ones_like(B[1:])
    if m.moe is not None:
        E, k = m.moe.n_experts, m.moe.n_active
        touched = lambda n: E * (1 - (1 - k / E) ** n)  # noqa: E731
        reach = touched(B[1:]) / touched(B[:-1])
    t = engine.evaluate(m, H100, B, 512.0, "decode", "achievable", grid=False, impl="vllm-0.24")["latency_s"]
    bound = step(B) * reach * noise
    assert np.all(t[1:] / t[:-1] <= bound + 1e-9), float(np.max(t[1:] / t[:-1] / bound))
    S = np.arange(64.0, 600.0)
    t = engine.evaluate(m, H100, 1.0, S, "prefill", "achievable", grid=False, impl="vllm-0.24")["latency_s"]
    bound = step(S) * noise
    assert np.all(t[1:] / t[:-1] <= bound + 1e-9), float(np.max(t[1:] / t[:-1] / bound))


@needs_aic
def test_mla_attention_is_priced_from_the_mla_tables_where_the_engine_has_them():
    """SGLang and TensorRT-LLM have MLA core tables (DeepSeek-V3's 576-wide latent); vLLM's are whole modules
    (projections included), which the op list cannot split: its MLA attention keeps the datasheet model."""
    h200 = load_hardware("h200")
    for impl, measured in (("trtllm-1.3", True), ("sglang-0.5", True), ("vllm-0.24", False)):
        t = pm.intensity("deepseek-v3", "h200", 32, 2048, weights_dtype="fp8", act_dtype="fp8", kv_dtype="fp8",
                         tp=8, mode="achievable", impl=impl)
        att = t[t.op.str.startswith("attn_qk")]
        assert (att.priced_by != "datasheet").all() == measured, impl
    ks = kernels.load(h200, "trtllm", "1.3.0rc20")
    # at a measured point the table comes back: 16 heads, batch 32, 2,048 keys, fp8 cache: 0.027221 ms
    r = float(ks.mla_ratio("generation", "fp8", 16, 32, 2048))
    assert r * float(kernels._ideal_mla(h200, "generation", 1.0, 16, 32, 2048)) == pytest.approx(0.027221e-3, rel=1e-4)


@needs_aic
@pytest.mark.parametrize("model,hw,prec", [("llama-3.1-8b", "h200", ("fp8", "fp8", "fp8")),
                                           ("qwen3-32b", "h100-sxm", ("bf16", "bf16", None))])
def test_a_serving_step_priced_by_measured_kernels_is_the_engines_mixed_step_in_every_simulator(model, hw, prec):
    """The measured context-attention tables are indexed by (batch, query length): the step cost of the serving
    simulators (StepCost, fastsim's FastCost) must give each step's own query length (one chunk: its T; several:
    sum T^2 / sum T), not the length their cached op templates were first built at. Before this test FastCost
    priced a 2,000-token chunk at a probe's length, 19-25% off on vllm-0.24's tables."""
    import numpy as np

    from perfmodel import engine, load_hardware, load_model
    from perfmodel.ops import Layout, Precision
    from perfmodel.serving import StepCost, fastsim

    m, h, p = load_model(model), load_hardware(hw), Precision(*prec)
    ref = StepCost(m, h, p, 1, Layout(), "achievable", "vllm-0.24")
    fast = fastsim.FastCost(StepCost(m, h, p, 1, Layout(), "achievable", "vllm-0.24"), 8192)
    rng = np.random.default_rng(3)
    for nd, chunks in [(0, [2000]), (7, [512]), (30, [1500, 300]), (0, [64, 4000, 900])]:
        T = np.concatenate([np.ones(nd, dtype=np.int64), chunks])
        S = np.concatenate([rng.integers(100, 8000, nd), np.asarray(chunks) + rng.integers(0, 3000, len(chunks))])
        want = engine.mixed_step(m, h, T, S, p, mode="achievable", impl="vllm-0.24")["latency_s"]
        assert ref(list(zip(T.tolist(), S.tolist()))) == pytest.approx(want, rel=1e-9), (nd, chunks)
        assert fast(T, S) == pytest.approx(want, rel=1e-9), (nd, chunks)
    assert engine.query_length([2000]) == 2000 and engine.query_length([1, 3]) == 2.5


# ---------------------------------------------------------------- a table that times something else
def test_a_block_scaled_fp8_table_several_times_the_per_tensor_one_at_memory_bound_shapes_is_not_used():
    """Block-scaled and per-tensor fp8 GEMMs move the same bytes: the ratio of their tables is taken over the
    memory-bound shapes (m <= 64, n and k >= 1024) only, as a median."""
    idx = pd.MultiIndex.from_product([[1, 64, 4096], [512, 2048, 16384], [512, 4096]], names=["m", "n", "k"])
    tensor = pd.Series(np.arange(1.0, idx.size + 1.0), index=idx)
    m, n, k = (idx.get_level_values(c) for c in ("m", "n", "k"))
    bound = (m <= 64) & (n >= 1024) & (k >= 1024)
    assert bound.sum() == 4
    block = tensor.where(~bound, tensor * 3.0)  # 3x at the memory-bound shapes, equal elsewhere
    assert kernels.block_ratio(block, tensor) == pytest.approx(3.0)
    assert kernels.block_ratio(tensor.where(bound, tensor * 50.0), tensor) == pytest.approx(1.0)  # others ignored
    assert math.isnan(kernels.block_ratio(block[~bound], tensor))  # no common memory-bound shape: nothing to say


@needs_aic
def test_vllm_s_block_scaled_fp8_tables_price_nothing_and_the_other_engines_keep_theirs(capsys):
    """AIConfigurator 0.12.0's vLLM 0.24 fp8_block GEMM tables are 3.5x (H100) to 29x (GB300) its per-tensor fp8
    ones at the same memory-bound shapes: fp8-b128 GEMMs fall back to the per-tensor table, and the footer says why.
    TensorRT-LLM's and SGLang's block tables (0.6x to 1.0x theirs) price them."""
    for dev in ("h100-sxm", "b200", "gb300"):
        hw = load_hardware(dev)
        v = kernels.load(hw, "vllm", "0.24.0")
        assert "fp8_block" not in v.gemm and "fp8" in v.gemm
        assert len(v.rejected) == 1 and v.rejected[0].startswith("gemm fp8_block (")
        assert float(v.rejected[0].split("(")[1].split("x")[0]) > kernels.MAX_BLOCK_RATIO
        for eng, ver in (("trtllm", "1.3.0rc20"), ("sglang", "0.5.14")):
            ks = kernels.load(hw, eng, ver)
            assert "fp8_block" in ks.gemm and not [r for r in ks.rejected if "fp8_block" in r], (dev, eng)
    main(["decode", "-m", "minimax-m2.5", "-H", "b300", "--tp", "4", "--batch", "64", "--weights-dtype", "fp8-b128",
          "--act-dtype", "fp8", "--mode", "achievable", "--impl", "vllm-0.24"])
    out = capsys.readouterr().out
    assert "not used as measured: gemm fp8_block (" in out and "the per-tensor fp8 kernels' time at the same shapes)" in out


@pytest.mark.parametrize("name", ["deepseek-v3", "mixtral-8x7b", "deepseek-v2-lite", "qwen3-30b-a3b", "gpt-oss-20b",
                                  "llama-3.1-8b"])
def test_a_tp_group_that_holds_whole_experts_does_the_same_work_on_its_own_tokens_and_is_priced_by_the_ep_kernel(name):
    """Layout(experts="ep") (TEP: attention tensor-parallel, experts expert-parallel over the group): every op but
    the experts' is the same, and the experts do the same FLOPs on the same weights (E/tp whole experts instead of
    d_ff/tp slices of all E), but each device reads and writes only its own token-expert pairs' activations: 1/tp
    of the tensor-parallel kernel's. The measured MoE kernel that prices them is the expert-parallel one. For every
    MoE kind and a dense model (no change); a bad value is refused in one line."""
    m, hw = load_model(name), load_hardware("gb300")
    prec = Precision("bf16")
    a, b = (build_ops(m, 4.0, 1.0, 4096.0, "decode", prec, layout=Layout(8, experts=x)) for x in ("tp", "ep"))
    assert [x.name for x in a] == [y.name for y in b]
    for x, y in zip(a, b):
        assert x.coll == y.coll
        assert np.allclose([x.flops, x.comm_bytes], [y.flops, y.comm_bytes], rtol=1e-12, atol=0.0)
        # the same weights, but for the down projection's bias (gpt-oss), which tensor parallelism keeps on every
        # device for every expert: within 1%
        biased = m.moe is not None and (m.moe.expert_bias or m.linear_bias)
        assert np.allclose([x.w_read, x.w_stored], [y.w_read, y.w_stored], rtol=1e-2 if biased else 1e-12)
        if x.moe is not None and x.kind == MATMUL:
            assert x.moe[5:] == (8, 1) and y.moe[5:] == (1, 8)
            rows_x, rows_y = x.gemm[0], y.gemm[0]
            assert rows_y == pytest.approx(rows_x / 8, rel=1e-12)  # each device: its share of the pairs
            # the input activations (rows x d_in) of the expert up projection: 1/tp of them
            if x.name == "expert_up_gate" or x.name == "expert_up":
                assert y.act_read == pytest.approx(x.act_read / 8, rel=1e-12)
        elif not x.name.startswith("expert"):
            assert (x.bytes, x.act_read) == (y.bytes, y.act_read)
    assert any(x.moe is not None for x in a) == bool(m.moe)
    roof = [engine.mixed_step(m, hw, [1] * 4, [4096] * 4, prec, layout=Layout(8, experts=x))["latency_s"]
            for x in ("tp", "ep")]
    assert roof[1] <= roof[0] if m.moe else roof[1] == roof[0]  # fewer bytes: the bound is never slower
    with pytest.raises(pm.SpecError, match="experts="):
        Layout(8, experts="dp")


def test_tep_under_attention_dp_spreads_the_experts_over_every_device_of_the_group_and_refuses_what_does_not_split():
    """With attention DP as well (tp x ep devices), a TEP group's experts run the expert-parallel kernel over all
    tp x ep devices, and experts that do not split over them are refused (DeepSeek's 256 over 4 x 128 = 512)."""
    m = load_model("deepseek-v3")
    ops = build_ops(m, 16.0, 1.0, 4096.0, "decode", Precision("bf16"), layout=Layout(2, ep=4, experts="ep"))
    keys = {x.moe[5:] for x in ops if x.moe is not None and x.kind == MATMUL}
    assert keys == {(1, 8)}
    with pytest.raises(pm.SpecError, match="tp x ep = 512"):
        build_ops(m, 16.0, 1.0, 4096.0, "decode", Precision("bf16"), layout=Layout(4, ep=128, experts="ep"))


@needs_aic
def test_trtllm_s_expert_parallel_moe_kernel_is_the_faster_one_at_a_decode_batch_on_blackwell():
    """AIConfigurator's TensorRT-LLM 1.3 MoE tables on GB300, fp8 block-scaled DeepSeek experts at one token: the
    tensor-parallel kernel over 8 GPUs takes about 17x its ideal time, the expert-parallel one about 8x; a TEP decode
    step of DeepSeek-V3 on 8 GB300s is faster priced by the kernel the engine ran. (The tables time DeepGEMM, the
    backend InferenceX's attention-DP recipes name: moe_backend DEEPGEMM.)"""
    from dataclasses import replace

    m, hw = load_model("deepseek-v3"), load_hardware("gb300")
    ip = replace(load_impl("trtllm-1.3"), moe_backend="DEEPGEMM")
    ks = kernels.load(hw, "trtllm", "1.3.0rc20")
    tp8 = ks.moe_ratio(["fp8_block", "fp8"], (7168, 2048, 8, 256, 8, 1), 1)
    ep8 = ks.moe_ratio(["fp8_block", "fp8"], (7168, 2048, 8, 256, 1, 8), 1)
    assert tp8 > 2 * ep8 > 2
    prec = Precision("fp8-b128", "fp8", "fp8")
    t = [engine.mixed_step(m, hw, [1], [9000], prec, layout=Layout(8, experts=x), mode="achievable",
                           impl=ip)["latency_s"] for x in ("tp", "ep")]
    assert t[1] < 0.8 * t[0]


# ---------------------------------------------------------------- TensorRT-LLM's NVLink all-to-all
def _a2a_table(path, rows):
    cols = ["kernel_source", "op_name", "moe_dtype", "hidden_size", "topk", "num_experts", "moe_ep_size",
            "num_tokens", "latency"]
    d = path / "comm" / "trtllm" / "1.3.0rc10"
    d.mkdir(parents=True)
    pd.DataFrame(rows, columns=cols).to_parquet(d / "trtllm_alltoall_perf.parquet")
    return path


def test_the_nvlink_all_to_all_takes_the_one_sided_kernel_where_measured_and_the_two_sided_with_its_prepare_else(
        tmp_path):
    """TensorRT-LLM's factory runs NVLinkOneSided on a multi-node-NVLink rack; a payload format only the two-sided
    kernel was measured with is priced by it, its dispatch with the prepare step it runs first (ms -> s)."""
    pytest.importorskip("pyarrow")
    rows = []
    for n, base in ((1, 0.010), (64, 0.020)):
        rows += [("NVLinkOneSided", "alltoall_dispatch", "nvfp4", 7168, 8, 256, 32, n, base),
                 ("NVLinkOneSided", "alltoall_combine", "nvfp4", 7168, 8, 256, 32, n, 2 * base),
                 ("NVLinkTwoSided", "alltoall_dispatch", "nvfp4", 7168, 8, 256, 32, n, 9.0),  # not the default
                 ("NVLinkTwoSided", "alltoall_dispatch", "fp8", 7168, 8, 256, 32, n, base),
                 ("NVLinkTwoSided", "alltoall_prepare", "fp8", 7168, 8, 256, 32, n, 0.5 * base),
                 ("NVLinkTwoSided", "alltoall_combine", "fp8", 7168, 8, 256, 32, n, 3 * base)]
    root = _a2a_table(tmp_path, rows)
    ks = kernels.KernelSet(source="test")
    kernels._load_nvlink_alltoall(ks, root, "1.3.0rc20")
    assert ks.versions["alltoall_ep"] == "1.3.0rc10"
    at = lambda ph, dt, tok, ep=32: float(ks.alltoall_ep_time(ph, dt, 7168, 8, 256, ep, tok))  # noqa: E731
    assert at("dispatch", "nvfp4", 1) == pytest.approx(10e-6) and at("combine", "nvfp4", 64) == pytest.approx(40e-6)
    assert at("dispatch", "fp8", 1) == pytest.approx(15e-6) and at("combine", "fp8", 1) == pytest.approx(30e-6)
    assert at("dispatch", "nvfp4", 8) == pytest.approx(10e-6 * 2 ** 0.5)  # log-log between 1 and 64 tokens
    assert at("dispatch", "nvfp4", 128) == pytest.approx(40e-6)  # past the largest batch: linear in the bytes
    assert at("dispatch", "nvfp4", 1, ep=16) == pytest.approx(10e-6)  # the nearest EP size measured
    assert ks.alltoall_ep_time("dispatch", "bfloat16", 7168, 8, 256, 32, 1) is None  # no table of that payload


@needs_aic
def test_tensorrt_llm_on_a_gb200_rack_prices_the_ep_all_to_all_by_its_nvlink_kernels_not_deepeps():
    """GB200 NVL72 has multi-node NVLink, so TensorRT-LLM's factory picks NVLinkOneSided for the attention-DP
    all-to-all; AIConfigurator measured it (1.2.0rc6) at EP 2-64. DeepSeek-R1 nvfp4, 32 sequences on 32
    attention-DP ranks (one token per rank): the measured one-sided dispatch and combine, read here from the table
    itself. vLLM on the same rack keeps DeepEP's. An HGX B200 or B300 is one NVLink domain of the same fifth-generation
    switches, where TensorRT-LLM runs the same kernel by default (its tech blog 18: "designed for NVLink-connected
    systems (DGX B200, GB200 NVL72, etc.)"): it borrows GB200's table and says so. H200's NVLink 4 has half the
    bandwidth and no measurement of it: DeepEP's."""
    m = load_model("deepseek-r1")
    prec = Precision("nvfp4", "nvfp4", "fp8")
    lay = Layout(ep=32)
    ops = [op for op in build_ops(m, 32.0, 1.0, 2048.0, "decode", prec, layout=lay) if op.coll == "alltoall"]
    assert [op.moe[0] for op in ops] == [1.0, 1.0]
    gb200 = load_hardware("gb200")
    t = pd.read_parquet(kernels.aic_dir() / "gb200/comm/trtllm/1.3.0rc10/trtllm_alltoall_perf.parquet")
    t = t[(t.kernel_source == "NVLinkOneSided") & (t.moe_dtype == "nvfp4") & (t.moe_ep_size == 32)
          & (t.num_tokens == 1)].set_index("op_name")["latency"] * 1e-3
    priced = {op.name: p[2] for op, p in zip(ops, TimeModel.achievable(gb200, load_impl("trtllm-1.3")).price(
        ops, gb200, prec, lay))}
    assert priced["alltoall_dispatch"] == pytest.approx(t["alltoall_dispatch"], rel=1e-9)
    assert priced["alltoall_combine"] == pytest.approx(t["alltoall_combine"], rel=1e-9)
    deepep = {op.name: p[2] for op, p in zip(ops, TimeModel.achievable(gb200, load_impl("vllm-0.24")).price(
        ops, gb200, prec, lay))}
    assert deepep["alltoall_dispatch"] > 2 * priced["alltoall_dispatch"]
    for name in ("gb300", "b200", "b300"):
        ks = kernels.load(load_hardware(name), "trtllm", "1.3.0rc20")
        assert ks.alltoall_ep and "borrowed from gb200" in ks.versions["alltoall_ep"], name
    assert not kernels.load(load_hardware("h200"), "trtllm", "1.3.0rc20").alltoall_ep
    assert not kernels.load(load_hardware("b200"), "vllm", "0.19.0").alltoall_ep  # vLLM's all-to-all is DeepEP's
    b200, lay8 = load_hardware("b200"), Layout(ep=8)  # 32 sequences on 8 attention-DP ranks: 4 tokens a rank
    ops8 = [op for op in build_ops(m, 32.0, 1.0, 2048.0, "decode", prec, layout=lay8) if op.coll == "alltoall"]
    t8 = pd.read_parquet(kernels.aic_dir() / "gb200/comm/trtllm/1.3.0rc10/trtllm_alltoall_perf.parquet")
    t8 = t8[(t8.kernel_source == "NVLinkOneSided") & (t8.moe_dtype == "nvfp4") & (t8.moe_ep_size == 8)
            & (t8.num_tokens == 4)].set_index("op_name")["latency"] * 1e-3
    on_b200 = {op.name: p[2] for op, p in zip(ops8, TimeModel.achievable(b200, load_impl("trtllm-1.3")).price(
        ops8, b200, prec, lay8))}
    assert [op.moe[0] for op in ops8] == [4.0, 4.0]
    for name in ("alltoall_dispatch", "alltoall_combine"):  # GB200's measurement of the same kernel at EP 8
        assert on_b200[name] == pytest.approx(t8[name], rel=1e-9)


@needs_aic
def test_a_static_fp8_checkpoint_on_tensorrt_llm_does_not_pay_the_dynamic_quantization_its_table_timed():
    """AIConfigurator's TensorRT-LLM fp8 rows time Linear.forward with no input scale: the dynamic path (amax,
    scale, quantize) inside each call. A static checkpoint runs t_fp8 - compute_scale, and an input that arrives in
    fp8 (o_proj, mlp_down) also skips the static quantize kernel (scale_matrix), as AIC's fp8_static. Read here
    from the parquet files themselves: H200, m = 4, n = 1024, k = 8192 is 16.3 us in the fp8 table."""
    h200 = load_hardware("h200")
    ks = kernels.load(h200, "trtllm", "1.3.0rc20")
    root = kernels.aic_dir() / "h200_sxm"
    g = pd.read_parquet(root / "gemm/trtllm/1.3.0rc20/gemm_perf.parquet")
    g = g[g.gemm_dtype == "fp8"].groupby(["m", "n", "k"])["latency"].min()
    q = {t: pd.read_parquet(root / f"quantize/trtllm/1.3.0rc20/{t}_perf.parquet").set_index(["m", "k"])["latency"]
         for t in ("computescale", "scale_matrix")}
    m, n, k = 4, 1024, 8192
    t_fp8 = g.loc[(m, n, k)] * 1e-3
    cs, sm = q["computescale"].loc[(m, k)] * 1e-3, q["scale_matrix"].loc[(m, k)] * 1e-3
    assert t_fp8 == pytest.approx(16.28e-6, rel=0.01) and cs > 5e-6 and sm > 1e-6
    ideal = float(kernels._ideal_gemm(h200, "fp8", m, n, k))
    at = {dt: float(ks.gemm_ratio(dt, m, n, k)) * ideal for dt in ("fp8", "fp8_static", "fp8_static_lp")}
    assert at["fp8"] == pytest.approx(t_fp8, rel=1e-9)
    assert at["fp8_static"] == pytest.approx(t_fp8 - cs, rel=1e-9)
    assert at["fp8_static_lp"] == pytest.approx(t_fp8 - cs - sm, rel=1e-9)
    # never below the ideal time, at every shape
    for dt in ("fp8_static", "fp8_static_lp"):
        assert np.all(ks.gemm[dt][1] >= -1e-12)
    # vLLM's collector times the static path already (Fp8Config activation_scheme="static"): nothing derived
    assert "fp8_static" not in kernels.load(h200, "vllm", "0.24.0").gemm


@needs_aic
def test_per_tensor_fp8_gemms_take_the_static_table_and_the_ones_fed_fp8_skip_their_quantize():
    """Llama-3.1-70B (per-tensor fp8, static scales as ModelOpt's checkpoints), 4 sequences on 8 H200s under
    TensorRT-LLM: qkv and gate_up are priced from fp8_static, o_proj and down from fp8_static_lp, each below
    what the dynamic table gives; block-scaled weights keep the block table."""
    h200 = load_hardware("h200")
    m = load_model("llama-3.1-70b")
    prec = Precision("fp8", "fp8", "fp8")
    lay = Layout(tp=8)
    ops = [op for op in build_ops(m, 4.0, 1.0, 1500.0, "decode", prec, layout=lay) if op.kind == MATMUL]
    tm = TimeModel.achievable(h200, load_impl("trtllm-1.3"))
    t = {op.name: p[2] for op, p in zip(ops, tm.price(ops, h200, prec, lay))}
    ks = kernels.load(h200, "trtllm", "1.3.0rc20")
    for op in ops:
        if op.name not in ("qkv_proj", "o_proj", "mlp_up_gate", "mlp_down"):
            continue
        rows, cols, _ = op.gemm
        k = float(op.flops) / (2.0 * rows * cols)
        table = "fp8_static_lp" if op.name in ("o_proj", "mlp_down") else "fp8_static"
        ideal = max(float(op.flops) / h200.peak("fp8"), float(op.bytes) / h200.memory_bandwidth)
        want = max(float(ks.gemm_ratio(table, rows, cols, k)), 1.0)
        dynamic = max(float(ks.gemm_ratio("fp8", rows, cols, k)), 1.0)
        assert want < dynamic, op.name
        assert t[op.name] == pytest.approx(want * ideal, rel=1e-6), op.name


@needs_aic
def test_tensorrt_llm_s_untuned_nvfp4_tables_are_capped_at_its_bf16_kernels_shape_by_shape():
    """An NVFP4 GEMM reads 9/32 of a bf16 one's weight bytes; TensorRT-LLM 1.3.0rc20's nvfp4 tables take longer
    than its bf16 ones at the memory-bound shapes (its collector never autotunes nvfp4_gemm): each shape is priced
    at the smaller of the two measured times, and the footer says so. vLLM's and SGLang's nvfp4 tables (faster than
    their bf16) stand as measured. Read here from the parquet files: B200, k = 8,192."""
    root = kernels.aic_dir() / "b200_sxm/gemm/trtllm/1.3.0rc20/gemm_perf.parquet"
    g = pd.read_parquet(root).groupby(["gemm_dtype", "m", "n", "k"])["latency"].min() * 1e-3
    b200 = load_hardware("b200")
    ks = kernels.load(b200, "trtllm", "1.3.0rc20")
    (why,) = [r for r in ks.rejected if r.startswith("gemm nvfp4 above the bf16 kernels' time (")]
    assert float(why.split("(")[1].split("x")[0]) > kernels.MAX_FP4_RATIO
    for m, n in ((4, 1024), (64, 8192), (8192, 8192)):
        t4, t16 = g.loc[("nvfp4", m, n, 8192)], g.loc[("bfloat16", m, n, 8192)]
        got = float(ks.gemm_ratio("nvfp4", m, n, 8192)) * float(kernels._ideal_gemm(b200, "nvfp4", m, n, 8192))
        assert got == pytest.approx(min(t4, t16), rel=1e-9), (m, n)
    assert g.loc[("nvfp4", 4, 1024, 8192)] > g.loc[("bfloat16", 4, 1024, 8192)]  # capped there
    assert g.loc[("nvfp4", 8192, 8192, 8192)] < g.loc[("bfloat16", 8192, 8192, 8192)]  # measured there
    for dev in ("b200", "b300", "gb200", "gb300"):
        hw = load_hardware(dev)
        assert [r for r in kernels.load(hw, "trtllm", "1.3.0rc20").rejected if "nvfp4" in r], dev
        for eng, ver in (("vllm", "0.24.0"), ("sglang", "0.5.14")):
            other = kernels.load(hw, eng, ver)
            assert "nvfp4" in other.gemm and not [r for r in other.rejected if "nvfp4" in r], (dev, eng)


# ---------------------------------------------------------------- TensorRT-LLM's MoE backends
def test_each_aiconfigurator_moe_label_names_the_tensorrt_llm_backend_that_ran_and_auto_resolves_as_the_engine():
    """collector/trtllm/collect_moe.py: CUTLASS, the trtllm-gen min-latency kernels (TRTLLM), DeepGEMM for fp8_block
    on SM100; MXFP4 experts ran trtllm-gen on Blackwell, Triton on Hopper. AUTO (TensorRT-LLM 1.3): fp8_block on
    SM 10.x and gpt-oss on Blackwell run TRTLLM, gpt-oss on Hopper TRITON, everything else CUTLASS."""
    lab = kernels.trtllm_moe_backend
    assert lab("moe_torch_flow_cutlass", "nvfp4", "b200_sxm") == "CUTLASS"
    assert lab("moe_torch_flow_min_latency", "nvfp4", "b200_sxm") == "TRTLLM"
    assert lab("deepgemm", "fp8_block", "gb300") == "DEEPGEMM"
    assert lab("moe_torch_flow_triton_fp8_block", "fp8_block", "rtx_pro_6000_server") == "CUTLASS"
    assert [lab("moe_torch_flow", "w4a16_mxfp4", s) for s in ("b200_sxm", "h200_sxm", "l40s")] == \
        ["TRTLLM", "TRITON", "CUTLASS"]
    assert lab("moe_torch_flow", "bfloat16", "a100_sxm") == "CUTLASS"
    auto = kernels.trtllm_auto_moe
    assert [auto("fp8_block", s) for s in ("b200_sxm", "b300_sxm", "gb200", "gb300", "h200_sxm")] == \
        ["TRTLLM"] * 4 + ["CUTLASS"]
    assert [auto(d, "b200_sxm") for d in ("nvfp4", "fp8", "bfloat16", "w4a16_mxfp4")] == \
        ["CUTLASS", "CUTLASS", "CUTLASS", "TRTLLM"]
    assert auto("w4a16_mxfp4", "h100_sxm") == "TRITON"
    assert set(kernels.TRT_MOE_BACKENDS) >= {"AUTO", "CUTLASS", "TRTLLM", "DEEPGEMM", "CUTEDSL", "WIDEEP", "TRITON"}


def _moe_tree(root, rows, system="b200_sxm", engine="trtllm", version="1.3.0rc20"):
    d = root / system / "moe" / engine / version
    d.mkdir(parents=True)
    cols = ["kernel_source", "moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts",
            "moe_tp_size", "moe_ep_size", "distribution", "latency"]
    pd.DataFrame(rows, columns=cols).to_parquet(d / "moe_perf.parquet")
    return root


def test_every_tensorrt_llm_moe_backend_keeps_its_own_table_and_the_unnamed_engine_takes_the_fastest(tmp_path,
                                                                                                     monkeypatch):
    """Two kernels timed for one nvfp4 shape (CUTLASS at twice the trtllm-gen kernel's time): `moe` keeps the faster
    per token count, each backend its own; a backend nobody timed has no table (None: the datasheet prices it)."""
    pytest.importorskip("pyarrow")
    shape = (7168, 2048, 8, 256, 8, 1)
    rows = [(src, "nvfp4", n, *shape, kernels.MOE_DISTRIBUTION, t * n ** 0.5)
            for n in (1, 16, 256) for src, t in (("moe_torch_flow_cutlass", 0.04), ("moe_torch_flow_min_latency", 0.02))]
    _moe_tree(tmp_path, rows)
    monkeypatch.setenv("PERFMODEL_AIC_DATA", str(tmp_path))
    ks = kernels._load_aic(load_hardware("b200"), "b200_sxm", "trtllm", "1.3.0rc20")
    assert ks.system == "b200_sxm" and set(ks.moe_by) == {"CUTLASS", "TRTLLM"}
    fast = ks.moe_ratio("nvfp4", shape, 16.0)
    cut = ks.moe_ratio("nvfp4", shape, 16.0, {"nvfp4": "CUTLASS"})
    gen = ks.moe_ratio("nvfp4", shape, 16.0, {"nvfp4": "TRTLLM"})
    assert float(cut) == pytest.approx(2 * float(gen)) and float(fast) == pytest.approx(float(gen))
    assert ks.moe_ratio("nvfp4", shape, 16.0, {"nvfp4": "CUTEDSL"}) is None
    assert "CUTEDSL" not in ks.moe_by  # asking does not create it


@needs_aic
def test_deepseek_fp8_on_b200_runs_trtllm_gen_experts_that_aiconfigurator_never_timed_so_the_datasheet_prices_them():
    """TensorRT-LLM 1.3's AUTO runs fp8 block-scaled experts with the TRTLLM backend on SM100; AIConfigurator timed
    only DeepGEMM for them there. At one sequence (8 B200s, tp 8) DeepGEMM's measured kernel takes about 17x its ideal
    time; priced as the engine runs it the step is 30-50% shorter, and the footer and priced_by column say how."""
    from perfmodel.cli.common import kernels_note

    kw = dict(batch=[1], context=8704, mode="achievable", weights_dtype="fp8-b128", act_dtype="fp8", kv_dtype="fp8",
              tp=8, impl="trtllm-1.3")
    auto = pm.decode("deepseek-r1", "b200", **kw).latency_s.iloc[0]
    deep = pm.decode("deepseek-r1", "b200", sets={"impl.moe_backend": "DEEPGEMM"}, **kw).latency_s.iloc[0]
    assert 0.5 * deep < auto < 0.7 * deep
    ops = pm.intensity("deepseek-r1", "b200", 1, 8704, mode="achievable", weights_dtype="fp8-b128", act_dtype="fp8",
                       kv_dtype="fp8", tp=8, impl="trtllm-1.3")
    by = dict(zip(ops.op[ops.phase == "decode"], ops.priced_by[ops.phase == "decode"]))
    assert by["expert_up_gate[moe x58]"] == "datasheet" and by["q_a_proj[moe x58]"].startswith("AIConfigurator")
    note = kernels_note(load_hardware("b200"), load_impl("trtllm-1.3"))
    assert "MoE backend AUTO" in note and "fp8_block TRTLLM (not measured: datasheet)" in note
    assert "nvfp4 CUTLASS" in note
    # gpt-oss's MXFP4 experts with fp4 activations read the nvfp4 tables, and AUTO (by the checkpoint: GptOss on
    # Blackwell) runs them on TRTLLM's trtllm-gen kernels, measured; CUTLASS's nvfp4 tables price nothing
    gk = dict(mode="achievable", weights_dtype="mxfp4", act_dtype="fp4", kv_dtype="fp8", tp=4, impl="trtllm-1.3")
    for be, want in ((None, "AIConfigurator"), ("CUTLASS", "datasheet")):
        ops = pm.intensity("gpt-oss-120b", "b200", 4, 2048, sets={"impl.moe_backend": be} if be else None, **gk)
        up = ops[(ops.phase == "decode") & ops.op.str.startswith("expert_up_gate")]
        assert up.priced_by.str.startswith(want).all(), be
    # DeepSeek-R1's NVFP4 experts (the same fp4 family) run CUTLASS under AUTO, whose tables price nothing here
    for be, want in ((None, "datasheet"), ("TRTLLM", "AIConfigurator")):
        ops = pm.intensity("deepseek-r1", "b200", 4, 2048, sets={"impl.moe_backend": be} if be else None,
                           **{**gk, "weights_dtype": "nvfp4", "tp": 8})
        up = ops[(ops.phase == "decode") & ops.op.str.startswith("expert_up_gate")]
        assert up.priced_by.str.startswith(want).all(), be


def test_a_moe_backend_is_one_its_engine_takes(capsys):
    """TensorRT-LLM's moe_config.backend names, vLLM's MARLIN; an SGLang profile takes none."""
    assert main(["decode", "-m", "deepseek-r1", "-H", "b200", "--mode", "achievable", "--impl", "vllm-0.24",
                 "--set", "impl.moe_backend=TRTLLM"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "moe_backend" in err and "must be one of MARLIN for vllm" in err \
        and "'TRTLLM'" in err
    assert main(["decode", "-m", "deepseek-r1", "-H", "b200", "--mode", "achievable", "--impl", "sglang-0.5",
                 "--set", "impl.moe_backend=MARLIN"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "TensorRT-LLM" in err and "engine is sglang" in err
    assert main(["decode", "-m", "deepseek-r1", "-H", "b200", "--mode", "achievable", "--impl", "trtllm-1.3",
                 "--set", "impl.moe_backend=FASTEST"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "must be one of AUTO" in err and "'FASTEST'" in err
    assert load_impl("trtllm-1.3").moe_backend == "AUTO" and load_impl("vllm-0.24").moe_backend == ""


def test_an_nvfp4_moe_kernel_no_faster_than_the_bf16_one_at_a_few_tokens_is_untuned_and_prices_nothing(tmp_path,
                                                                                                    monkeypatch):
    """NVFP4 experts read 9/32 of the bf16 bytes: every tuned nvfp4 MoE kernel AIConfigurator timed takes 0.38x to
    0.65x its engine's bf16 one at <= 64 tokens. A source at 0.9x (TensorRT-LLM's CUTLASS tables, never autotuned)
    prices nothing and the footer says so; one at 0.45x (trtllm-gen) stands. relu2 experts' rows (no gate) are not
    read: no model of the catalog runs that kernel."""
    pytest.importorskip("pyarrow")
    shape = (7168, 2048, 8, 256, 8, 1)
    rows = []
    for n in (1, 16, 64, 1024):
        for src, dt, t in (("moe_torch_flow_cutlass", "bfloat16", 0.10), ("moe_torch_flow_cutlass", "nvfp4", 0.09),
                           ("moe_torch_flow_min_latency", "nvfp4", 0.045), ("moe_torch_flow_nongated", "nvfp4", 0.001)):
            rows.append((src, dt, n, *shape, kernels.MOE_DISTRIBUTION, t * n ** 0.5))
    _moe_tree(tmp_path, rows)
    monkeypatch.setenv("PERFMODEL_AIC_DATA", str(tmp_path))
    ks = kernels._load_aic(load_hardware("b200"), "b200_sxm", "trtllm", "1.3.0rc20")
    assert "nvfp4" not in ks.moe_by.get("CUTLASS", {}) and "nvfp4" in ks.moe_by["TRTLLM"]
    assert ks.rejected == ["moe nvfp4 CUTLASS (0.90x the bf16 MoE kernels' time at <= 64 tokens)"]
    best = ks.moe_ratio("nvfp4", shape, 16.0)  # the nongated rows (50x faster) are not the fastest kernel here
    assert float(best) == pytest.approx(float(ks.moe_ratio("nvfp4", shape, 16.0, {"nvfp4": "TRTLLM"})))
    assert kernels._untuned_fp4_moe(pd.DataFrame(rows, columns=["kernel_source", "moe_dtype", "num_tokens",
                                                                "hidden_size", "inter_size", "topk", "num_experts",
                                                                "moe_tp_size", "moe_ep_size", "distribution",
                                                                "latency"]),
                                    ["moe_dtype", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
                                     "moe_ep_size"]) == {"moe_torch_flow_cutlass": pytest.approx(0.9)}


def test_the_untuned_fp4_moe_rule_compares_the_same_shape_at_up_to_64_tokens_and_spares_a_ratio_of_exactly_0_8():
    cols = ["kernel_source", "moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts",
            "moe_tp_size", "moe_ep_size", "distribution", "latency"]
    keys = ["moe_dtype", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size"]
    a, b = (7168, 2048, 8, 256, 8, 1), (4096, 2048, 8, 256, 8, 1)  # two models' shapes: hidden size apart
    d = "power_law_1.01"
    rows = lambda spec: pd.DataFrame([(s, dt, n, *sh, d, t) for s, dt, n, sh, t in spec], columns=cols)  # noqa: E731
    # bf16 measured for one shape, nvfp4 for the other: nothing to compare, nothing rejected
    apart = rows([("c", "bfloat16", n, a, 1.0) for n in (1, 64)] + [("c", "nvfp4", n, b, 0.95) for n in (1, 64)])
    assert kernels._untuned_fp4_moe(apart, keys) == {}
    # only 64 tokens is at most 64: it alone decides
    edge = rows([("c", "bfloat16", n, a, 1.0) for n in (64, 1024)] + [("c", "nvfp4", n, a, 0.9) for n in (64, 1024)])
    assert kernels._untuned_fp4_moe(edge, keys) == {"c": pytest.approx(0.9)}
    at = rows([("c", "bfloat16", 1, a, 1.0), ("c", "nvfp4", 1, a, 0.8)])
    assert kernels._untuned_fp4_moe(at, keys) == {}  # not above MAX_FP4_MOE_RATIO


@needs_aic
def test_vllm_s_moe_kernels_are_its_own_choice_no_backend_table_and_no_backend_words_in_the_footer():
    """vLLM picks its MoE kernels itself; the one backend a launch can force, Marlin, keeps its own table (on B200
    AIConfigurator timed MarlinExperts for int4 and MXFP4 checkpoints), and no profile names it by default."""
    from perfmodel.cli.common import kernels_note

    b200 = load_hardware("b200")
    assert set(kernels.load(b200, "vllm", "0.24.0").moe_by) <= {"MARLIN"}
    note = kernels_note(b200, load_impl("vllm-0.24"))
    assert "MoE backend" not in note and "None" not in note


def test_only_the_marlinexperts_labels_are_vllm_s_marlin_the_old_int4_label_ran_the_triton_path():
    """AIConfigurator's 0.24.0 vLLM labels name the kernel class (..._marlin_marlinexperts); its 0.19.0 collector
    timed "vllm_marlin_int4_moe" through fused_experts, vLLM's Triton path, so that label is no Marlin table."""
    lab = kernels.vllm_moe_backend
    assert lab("vllm_compressedtensorsw4a4mxfp4moe_marlin_marlinexperts_situ_as_silu") == "MARLIN"
    assert lab("vllm_gptossmxfp4moe_marlin_marlinexperts") == "MARLIN"
    assert lab("vllm_marlin_int4_moe") is None and lab("vllm_gptossmxfp4moe_triton_oaitritonmxfp4expertsmonolithic") is None
    assert lab("vllm_fused_moe") is None


def test_a_version_that_timed_no_marlin_kernel_borrows_the_nearest_version_s_and_says_so(tmp_path, monkeypatch):
    """Marlin twice as slow as the default kernel at one shape: a 0.19.0 profile (no Marlin rows) prices a Marlin run
    from the nearest version that timed one: 0.22.0, three minor versions on, not 0.15.0 (four back) nor 0.30.0;
    0.20.0 (no Marlin rows), 0.21.0 (no kernel labels) and 0.18.0 (no MoE table) lend nothing. It keeps its own fastest table and names the
    lender; a version with its own Marlin rows borrows nothing."""
    pytest.importorskip("pyarrow")
    shape = (2880, 2880, 4, 128, 1, 1)
    d = kernels.MOE_DISTRIBUTION
    marlin_src, triton_src = "vllm_gptossmxfp4moe_marlin_marlinexperts", "vllm_gptossmxfp4moe_triton_oaitritonmxfp4expertsmonolithic"
    for v, rows in (("0.15.0", [(marlin_src, 4.0)]), ("0.19.0", [("vllm_mxfp4_moe", 1.0)]),
                    ("0.20.0", [("vllm_fused_moe", 1.0)]), ("0.22.0", [(marlin_src, 2.0), (triton_src, 1.0)]),
                    ("0.30.0", [(marlin_src, 8.0)])):
        _moe_tree(tmp_path, [(src, "w4a16_mxfp4", n, *shape, d, t * n ** 0.5) for n in (1, 64, 8192)
                             for src, t in rows], system="h200_sxm", engine="vllm", version=v)
    (tmp_path / "h200_sxm" / "moe" / "vllm" / "0.18.0").mkdir()  # a version folder without a MoE table
    unlabelled = tmp_path / "h200_sxm" / "moe" / "vllm" / "0.21.0"  # a table without kernel_source: nothing to lend
    _moe_tree(tmp_path / "x", [("", "w4a16_mxfp4", n, *shape, d, 0.5) for n in (1, 64)], system="h200_sxm",
              engine="vllm", version="0.21.0")
    unlabelled.mkdir()
    pd.read_parquet(tmp_path / "x" / "h200_sxm" / "moe" / "vllm" / "0.21.0" / "moe_perf.parquet").drop(
        columns="kernel_source").to_parquet(unlabelled / "moe_perf.parquet")
    monkeypatch.setenv("PERFMODEL_AIC_DATA", str(tmp_path))
    h200 = load_hardware("h200")
    ks = kernels._load_aic(h200, "h200_sxm", "vllm", "0.19.0")
    assert ks.versions["moe"] == "0.19.0" and ks.versions["moe MARLIN"].startswith("0.22.0, lent")
    fast = float(ks.moe_ratio("w4a16_mxfp4", shape, 64.0))
    marlin = float(ks.moe_ratio("w4a16_mxfp4", shape, 64.0, {"w4a16_mxfp4": "MARLIN"}))
    assert marlin == pytest.approx(2 * fast)
    own = kernels._load_aic(h200, "h200_sxm", "vllm", "0.30.0")
    assert "moe MARLIN" not in own.versions
    assert float(own.moe_ratio("w4a16_mxfp4", shape, 64.0, {"w4a16_mxfp4": "MARLIN"})) == pytest.approx(8 * fast)


def test_vllm_takes_the_flashinfer_mxfp8_shapes_it_lacks_from_sglang_s_newest_table_and_keeps_its_own(tmp_path,
                                                                                                      monkeypatch):
    """vLLM's 0.24.0 table times W4A8 only at one shape (x); SGLang 0.5.14 times FlashInfer's W4A8 kernel at gpt-oss's
    shape and at x (at other times), and another kernel (its own label) at a third. vLLM gets gpt-oss's shape from
    SGLang 0.5.14 (not the older 0.5.10), keeps its own x, takes nothing of the other label, and says what it lent.
    SGLang's and TensorRT-LLM's loads lend nothing."""
    pytest.importorskip("pyarrow")
    oss, x, y = (2880, 2880, 4, 128, 1, 1), (4096, 2048, 6, 256, 1, 1), (7168, 3072, 6, 384, 1, 1)
    d, dt, src = kernels.MOE_DISTRIBUTION, *kernels.FLASHINFER_W4A8
    ns = (1, 64, 8192)
    _moe_tree(tmp_path, [("vllm_mxfp4moe_flashinfer_trtllm_mxfp4_mxfp8_trtllmmxfp4expertsmodular", dt, n, *x, d,
                          0.1 * n ** 0.5) for n in ns], engine="vllm", version="0.24.0")
    _moe_tree(tmp_path, [(src, dt, n, *oss, d, 0.2 * n ** 0.5) for n in ns]
              + [(src, dt, n, *x, d, 0.3 * n ** 0.5) for n in ns]
              + [("sglang_mxfp4_flashinfer_trtllm_moe", dt, n, *y, d, 0.4 * n ** 0.5) for n in ns],
              engine="sglang", version="0.5.14")
    _moe_tree(tmp_path, [(src, dt, n, *oss, d, 0.9 * n ** 0.5) for n in ns], engine="sglang", version="0.5.10")
    # a newer SGLang table that timed W4A8 with another kernel only lends nothing and is passed over
    _moe_tree(tmp_path, [("sglang_mxfp4_flashinfer_trtllm_moe", dt, n, *oss, d, 0.7 * n ** 0.5) for n in ns],
              engine="sglang", version="0.5.16")
    monkeypatch.setenv("PERFMODEL_AIC_DATA", str(tmp_path))
    b200 = load_hardware("b200")
    ks = kernels._load_aic(b200, "b200_sxm", "vllm", "0.24.0")
    assert set(ks.moe[dt]) == {oss, x}
    assert ks.versions["moe " + dt] == "1 shapes lent by sglang 0.5.14: the same FlashInfer kernel"
    kinds = ks.kinds()  # the lent note once, right after the MoE tables' own version
    assert [k for k in kinds if "lent by" in k] == [f"moe {dt} (1 shapes lent by sglang 0.5.14: the same FlashInfer kernel)"]
    assert kinds[kinds.index("moe 0.24.0") + 1].startswith("moe " + dt)
    for shape, t in ((oss, 0.2), (x, 0.1)):  # SGLang 0.5.14's time at gpt-oss's shape, vLLM's own at x
        r = float(ks.moe_ratio(dt, shape, 64.0))
        assert r * float(kernels._ideal_moe(b200, dt, 64.0, *shape)) == pytest.approx(t * 8 * 1e-3, rel=1e-9)
    # a vLLM table that has every shape SGLang's has keeps its own and says nothing was lent
    _moe_tree(tmp_path, [("vllm_x", dt, n, *shape, d, 0.1 * n ** 0.5) for n in ns for shape in (oss, x)],
              engine="vllm", version="0.30.0")
    full = kernels._load_aic(b200, "b200_sxm", "vllm", "0.30.0")
    assert set(full.moe[dt]) == {oss, x} and "moe " + dt not in full.versions
    r = float(full.moe_ratio(dt, oss, 64.0))  # its own time at gpt-oss's shape, not SGLang's
    assert r * float(kernels._ideal_moe(b200, dt, 64.0, *oss)) == pytest.approx(0.1 * 8 * 1e-3, rel=1e-9)
    for engine, version in (("sglang", "0.5.14"), ("trtllm", "1.3.0rc20")):
        if engine == "trtllm":
            _moe_tree(tmp_path, [("moe_torch_flow", dt, n, *x, d, 0.1 * n ** 0.5) for n in ns])
        other = kernels._load_aic(b200, "b200_sxm", engine, version)
        assert "moe " + dt not in other.versions and set(other.moe[dt]) == ({oss, x, y} if engine == "sglang" else {x})


@needs_aic
def test_gpt_oss_on_vllm_b200_prices_its_mxfp8_experts_from_the_lent_kernel_and_hopper_from_the_bf16_one():
    """On B200 vLLM's own tables time gpt-oss's experts only as MXFP4 x BF16; with fp4 activations the MXFP4 x MXFP8
    kernel SGLang timed at that shape prices them, at the fp8 peak, faster than the BF16 kernel once compute-bound
    (a 4,096-token prefill). H200 has no MXFP8 kernel: the BF16 one, at the bf16 peak."""
    from perfmodel.ops import MATMUL, Precision, build_ops
    from perfmodel.timemodel import TimeModel

    m = load_model("gpt-oss-120b")
    for gpu, dt, peak in (("b200", "w4a8_mxfp4_mxfp8", "fp8"), ("h200", "w4a16_mxfp4", "bf16")):
        hw = load_hardware(gpu)
        tm = TimeModel.achievable(hw, load_impl("vllm-0.24"))
        ks = tm.kernels_table
        prec = Precision("nvfp4", "fp8")
        op = next(o for o in build_ops(m, 1.0, 4096.0, 4096.0, "prefill", prec) if o.kind == MATMUL and o.moe)
        M, D, F, topk, E, tp, ep = op.moe
        shape = (D, F, topk, E, tp, ep)
        assert ks.moe_dtype(["w4a8_mxfp4_mxfp8", "w4a16_mxfp4"], shape) == dt
        t = float(tm.price([op], hw, prec)[0][2])
        r = float(ks.moe_ratio(dt, shape, M, hw=hw))
        assert t == pytest.approx(max(r, 1.0) * max(op.flops / hw.peak(peak), op.bytes / hw.memory_bandwidth), rel=1e-9)
        if gpu == "b200":
            assert "lent by sglang" in ks.versions["moe " + dt]
            assert r * float(kernels._ideal_moe(hw, dt, M, *shape)) < float(ks.moe_ratio("w4a16_mxfp4", shape, M)) \
                * float(kernels._ideal_moe(hw, "w4a16_mxfp4", M, *shape))


def test_only_tensorrt_llm_s_tables_lose_an_untuned_fp4_kernel_and_sglang_names_no_backend(tmp_path, monkeypatch):
    """The untuned-fp4 rule answers TensorRT-LLM's collector (it never autotunes): a vLLM nvfp4 MoE table as slow as
    its bf16 one stands. SGLang cannot be told a MoE backend: a Marlin-labelled row of its tables is no MARLIN table."""
    pytest.importorskip("pyarrow")
    shape = (7168, 2048, 8, 256, 8, 1)
    d = kernels.MOE_DISTRIBUTION
    rows = [(src, dt, n, *shape, d, 0.05 * n ** 0.5) for n in (1, 16, 256)
            for src, dt in (("vllm_fused_moe", "bfloat16"), ("vllm_flashinfer_trtllm_moe_fp4", "nvfp4"))]
    _moe_tree(tmp_path, rows, system="b200_sxm", engine="vllm", version="0.19.0")
    _moe_tree(tmp_path, [("sglang_marlinexperts", "bfloat16", n, *shape, d, 0.05 * n ** 0.5) for n in (1, 16, 256)],
              system="b200_sxm", engine="sglang", version="0.5.9")
    monkeypatch.setenv("PERFMODEL_AIC_DATA", str(tmp_path))
    b200 = load_hardware("b200")
    ks = kernels._load_aic(b200, "b200_sxm", "vllm", "0.19.0")
    assert ks.rejected == [] and shape in ks.moe["nvfp4"]
    sg = kernels._load_aic(b200, "b200_sxm", "sglang", "0.5.9")
    assert sg.moe_by == {} and shape in sg.moe["bfloat16"]


@needs_aic
def test_gpt_oss_told_to_run_marlin_on_h200_prefills_about_twice_as_long_in_its_experts_as_vllm_s_default():
    """InferenceX's gpt-oss H100/H200 vLLM scripts export VLLM_MXFP4_USE_MARLIN=1. Marlin's kernel (mma.sync, no
    Hopper warpgroup MMA) reaches about a fifth of the bf16 peak at thousands of tokens, where vLLM's default Triton
    kernel reaches about two fifths (AIConfigurator's H200 tables: MarlinExperts in 0.24.0, lent to the 0.19 profile),
    so an 8,192-token prefill's experts take 1.5-2.5x as long; the footer names the backend and the lender."""
    from perfmodel.cli.common import kernels_note

    kw = dict(mode="achievable", weights_dtype="mxfp4", impl="vllm-0.19")
    marlin = {"impl.moe_backend": {"value": "MARLIN", "source": "VLLM_MXFP4_USE_MARLIN=1"}}
    base = pm.intensity("gpt-oss-120b", "h200", 1, 8192, **kw)
    mar = pm.intensity("gpt-oss-120b", "h200", 1, 8192, sets=marlin, **kw)
    up = lambda t: t[(t.phase == "prefill") & t.op.str.startswith("expert_up_gate")].time_s.sum()  # noqa: E731
    assert 1.5 * up(base) < up(mar) < 2.5 * up(base)
    rest = lambda t: t[(t.phase == "prefill") & ~t.op.str.startswith("expert_")].time_s.sum()  # noqa: E731
    assert rest(mar) == pytest.approx(rest(base))  # only the experts change
    note = kernels_note(load_hardware("h200"), dataclasses.replace(load_impl("vllm-0.19"), moe_backend="MARLIN"))
    assert "MoE backend MARLIN" in note and "w4a16_mxfp4 MARLIN (tables of 0.24.0, lent" in note
    assert "bfloat16 MARLIN (not measured: datasheet)" in note


@pytest.mark.parametrize("table, fmt", [("w4a16_mxfp4", "mxfp4"), ("w4a8_mxfp4_mxfp8", "mxfp4"), ("fp8", "fp8"),
                                        ("bfloat16", "bf16")])
def test_a_table_s_weight_bytes_are_its_format_s_bits_with_the_block_scales(table, fmt):
    """The ideal time a table's r is relative to reads its weights at the bytes of their stored format: MXFP4 is 4
    bits plus one 8-bit scale per 32 (4.25 bits, both the W4A16 and the W4A8 kernels' weights), fp8 and bf16 their
    element size (formats.py)."""
    from perfmodel.formats import get_format
    from perfmodel.kernel_set import _BYTES

    assert _BYTES[table] == pytest.approx(get_format(fmt).bits_per_element() / 8.0, rel=1e-12)


def test_an_nvfp4_table_s_weights_are_4_5_bits_its_tensor_scale_aside():
    """NVFP4: 4 bits plus one 8-bit scale per 16 elements (4.5 bits); the one FP32 scale per tensor is not per
    element (formats.py)."""
    from perfmodel.formats import get_format
    from perfmodel.kernel_set import _BYTES

    f = get_format("nvfp4")
    assert _BYTES["nvfp4"] == pytest.approx((f.bits + f.scale_bits / f.group) / 8.0, rel=1e-12) == 0.5625
