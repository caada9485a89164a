"""The achievable time model as laws: the roofline is its special case, it never beats the roofline,
every term is a non-negative time, collectives are chosen the way the libraries choose them, and
layouts are priced on data the spec has."""
import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import perfmodel as pm
from perfmodel import engine, parallel
from perfmodel.cli import main
from perfmodel.efficiency import Algorithm
from perfmodel.ops import COMM, Layout, Precision
from perfmodel.timemodel import TimeModel, steps_and_bytes, time_model

# every model kind of the catalog: MHA, GQA, MLA, CLA, sliding window, hybrid, linear, MoE, MLA + MoE
KINDS = ["llama-2-13b", "llama-3.1-8b", "llama-2-13b-mla", "llama-2-13b-cla2", "llama-2-13b-swa",
         "llama-2-13b-hybrid", "llama-2-13b-linear", "mixtral-8x7b", "deepseek-v2-lite"]
MODELS = {n: pm.load_model(n) for n in KINDS}
GPUS = [n for n in pm.catalog_names("hardware") if pm.load_hardware(n).achievable is not None]
HW = {n: pm.load_hardware(n) for n in GPUS}
FORMATS = [("bf16", "bf16", None), ("fp8", "fp8", "fp8"), ("int4-g128", "bf16", None), ("int8", "bf16", "fp8")]


def layouts_for(m, hw):
    out = [Layout()]
    two = (hw.devices_per_node or 1) >= 2  # a second device on the scale-up link
    if two and m.N % 2 == 0 and (m.K % 2 == 0 or 2 % m.K == 0):
        out.append(Layout(tp=2))
    if two and m.moe:
        out.append(Layout(ep=2))
    if hw.network_bandwidth and m.N % 16 == 0 and (m.K % 16 == 0 or 16 % m.K == 0):
        out.append(Layout(tp=16))  # crosses a node of 8
    return out


def supported(hw, prec):
    wf, af, kf, _ = prec.formats()
    return af.peak in hw.peak_flops and (wf.bits >= 16 or "int4" in hw.achievable.dequant)


cases = st.tuples(st.sampled_from(KINDS), st.sampled_from(GPUS), st.sampled_from(FORMATS), st.integers(1, 512),
                  st.integers(1, 32768), st.sampled_from(["decode", "prefill"]))


@settings(max_examples=40)
@given(cases)
def test_achievable_with_every_efficiency_1_and_every_overhead_0_is_the_roofline(case):
    name, gpu, (w, a, kv), B, S, phase = case
    m, hw, prec = MODELS[name], HW[gpu], Precision(w, a, kv)
    if not supported(hw, prec):
        return
    S = min(S, 4096) if phase == "prefill" else S
    ideal = TimeModel.achievable(hw, pm.specs.load_impl("graphs")).ideal(hw)
    for lay in layouts_for(m, hw):
        roof = engine.evaluate(m, hw, [B, 2 * B], [S], phase, "roofline", prec, layout=lay)["latency_s"]
        same = engine.evaluate(m, hw, [B, 2 * B], [S], phase, "roofline", prec, layout=lay, tm=ideal)["latency_s"]
        np.testing.assert_array_equal(same, roof)


@settings(max_examples=40)
@given(cases, st.sampled_from(["graphs", "compiled", "eager", "eager-fused"]))
def test_per_op_the_achievable_time_is_never_below_the_roofline_and_every_term_is_a_time(case, impl):
    name, gpu, (w, a, kv), B, S, phase = case
    m, hw, prec = MODELS[name], HW[gpu], Precision(w, a, kv)
    if not supported(hw, prec):
        return
    S = min(S, 4096) if phase == "prefill" else S
    ach = time_model("achievable", hw, impl)
    for lay in layouts_for(m, hw):
        ops = pm.build_ops(m, B, 1 if phase == "decode" else S, S, phase, prec, layout=lay)
        roof = TimeModel.roofline().price(ops, hw, prec, lay)
        est = ach.price(ops, hw, prec, lay)
        for op, r, e in zip(ops, roof, est):
            for x in e:
                assert np.all(np.isfinite(x)) and np.all(np.asarray(x) >= 0), op
            assert np.all(np.asarray(e[2]) >= np.asarray(r[2]) * (1 - 1e-12)), (op, gpu, lay)


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("p", [2, 4, 8])
def test_all_reduce_time_never_falls_as_the_message_grows_across_the_algorithm_switches(gpu, p):
    hw = HW[gpu]
    if p > (hw.devices_per_node or 1):
        pytest.skip("the group does not fit a node")
    n = np.geomspace(8, 2**31, 400)
    op = pm.Op("allreduce_mlp", "", 1, COMM, coll="allreduce", msg=n, peers=p)
    op.link = "tp"
    for tm in (TimeModel.roofline(), time_model("achievable", hw, "graphs"), time_model("achievable", hw, "compiled")):
        t, _, _ = tm.collective(op, hw, Layout(tp=p))
        assert np.all(np.diff(t) >= -1e-18), (gpu, p, tm.mode)


def test_the_cheapest_algorithm_wins_small_messages_one_shot_and_large_ones_the_bus_efficient():
    hw = HW["h100-sxm"]
    tm = time_model("achievable", hw, "graphs")
    op = pm.Op("allreduce_mlp", "", 1, COMM, coll="allreduce", msg=np.array([1e3, 1e9]), peers=8)
    op.link = "tp"
    t, sent, _ = tm.collective(op, hw, Layout(tp=8))
    one = hw.achievable.link["oneshot"]
    assert t[0] == pytest.approx(one.at(8) + 7 * 1e3 / (one.efficiency * hw.link_bandwidth))  # one-shot: 7 peers
    ring, nvls = hw.achievable.link["ring"], hw.achievable.link["nvls"]
    t_nvls = nvls.at(8) + 1e9 / (nvls.efficiency * hw.link_bandwidth)
    t_ring = ring.at(8, lambda q: 2 * (q - 1)) + 1.75e9 / (ring.efficiency * hw.link_bandwidth)
    assert t[1] == pytest.approx(min(t_nvls, t_ring))  # beyond the custom kernels' 8 MiB: NCCL's best


def test_steps_and_bytes_of_each_algorithm():
    n, p = 1000.0, 8.0
    assert steps_and_bytes("allreduce", "ring", p, n) == (14.0, 1750.0)
    assert steps_and_bytes("allreduce", "tree", p, n) == (6.0, 1750.0)
    assert steps_and_bytes("allreduce", "oneshot", p, n) == (1.0, 7000.0)
    assert steps_and_bytes("allreduce", "twoshot", p, n) == (2.0, 1750.0)
    assert steps_and_bytes("allreduce", "nvls", p, n) == (2.0, 1000.0)
    assert steps_and_bytes("alltoall", "direct", p, n) == (1.0, 875.0)
    assert steps_and_bytes("alltoall", "ring", p, n) == (7.0, 875.0)
    assert steps_and_bytes("send", "direct", 2.0, n) == (1.0, 1000.0)


def test_a_measured_latency_is_interpolated_in_the_group_size_and_a_ring_scales_by_its_steps_beyond():
    a = Algorithm(((2, 4e-6), (8, 10e-6)), 0.5)
    assert a.at(2) == 4e-6 and a.at(8) == 10e-6 and a.at(4) == pytest.approx(6e-6)
    assert a.at(1) == 4e-6  # below the smallest size: its value
    assert a.at(16, lambda q: 2 * (q - 1)) == pytest.approx(10e-6 * 30 / 14)
    assert a.at(16) == 10e-6  # one-step algorithms keep the largest size's latency
    assert Algorithm(((0, 3e-6),), 1.0).at(64) == 3e-6  # one value for every size
    # a table measured from one device up is interpolated like any other (only p = 0 means "every size")
    assert Algorithm(((1, 1e-6), (8, 8e-6)), 1.0).at(4) == pytest.approx(4e-6)


def test_a_weight_format_is_dequantized_by_its_family_and_an_unquantized_one_is_its_own():
    from perfmodel.efficiency import dequant_family

    assert [dequant_family(f) for f in ("int4-g128", "NF4-dq", "mxfp4", "nvfp4", "fp8-block", "int8")] == \
        ["int4", "nf4", "fp4", "fp4", "fp8", "int8"]
    assert dequant_family("BF16") == "bf16"  # no dequantizing kernel: the format's own name, which no table names


def test_a_group_across_nodes_pays_the_network_hop_on_its_inter_node_steps_only():
    hw = HW["h100-sxm"]
    op = pm.Op("allreduce_mlp", "", 1, COMM, coll="allreduce", msg=np.array([8.0]), peers=16)
    op.link = "tp"
    t, _, kind = TimeModel.roofline().collective(op, hw, Layout(tp=16))
    assert kind == "network"
    n, bw = 8.0, hw.network_bandwidth
    ring = 2 * 1 * hw.network_latency + 28 * hw.link_latency + 2 * 15 / 16 * n / bw  # 2 of 30 ring steps cross
    tree = 2 * 1 * hw.network_latency + 6 * hw.link_latency + 2 * 15 / 16 * n / bw  # log2(16) levels, 1 inter-node
    assert float(t[0]) == pytest.approx(min(ring, tree), rel=1e-12)


def test_tiles_pad_rows_and_columns_but_stream_k_leaves_no_partial_wave():
    tm = dataclasses.replace(TimeModel.roofline(), tiles=((64, 128),), sm_count=132)
    assert tm.shape_efficiency((64.0, 128 * 132, 1.0)) == pytest.approx(1.0)  # one full wave
    assert tm.shape_efficiency((65.0, 128 * 132, 1.0)) == pytest.approx(65 / 128)  # a second row of tiles
    # 133 tiles on 132 SMs: stream-K spreads the 133rd tile's K loop over the SMs (no second wave of 132)
    assert tm.shape_efficiency((64.0, 128 * 133, 1.0)) == pytest.approx(1.0)
    assert tm.shape_efficiency((64.0, 128 * 133 + 1, 1.0)) == pytest.approx((128 * 133 + 1) / (128 * 134))  # a column tile
    assert tm.shape_efficiency((8.0, 128 * 132, 1.0)) == pytest.approx(1.0)  # a skinny GEMM pads no rows
    # a weight-only kernel blocks rows by 16 (Marlin): 65 rows pad to 80, not to 128
    assert tm.shape_efficiency((65.0, 128 * 132, 1.0), row_tile=16.0) == pytest.approx(65 / 80)
    # 4 experts reached, 256 token-expert rows: 64 rows each, one tile row per expert
    assert tm.shape_efficiency((256.0, 128 * 33, 4.0)) == pytest.approx(1.0)


def test_attention_reaches_half_its_long_sequence_rate_at_half_keys():
    hw = HW["h100-sxm"]
    a = hw.achievable
    tm = time_model("achievable", hw, "graphs")
    m = pm.load_model("llama-3.1-8b")
    for S in (a.attention_half_keys, 8 * a.attention_half_keys):
        ops = pm.build_ops(m, 1, S, S, "prefill")
        (qk,) = [o for o in ops if o.name == "attn_qk"]
        tc = tm.price([qk], hw, Precision())[0][0]
        e = qk.flops / (tc * hw.peak("bf16"))
        assert e == pytest.approx(a.attention_compute["bf16"] * S / (S + a.attention_half_keys))


@pytest.mark.parametrize("T,S", [(1, 1), (1, 2), (1, 5000), (7, 7), (4, 20)])
def test_attention_sinks_pay_the_full_attention_rate_and_only_the_products_pay_for_short_key_ranges(T, S):
    """derivations "Achievable time": gpt-oss's sinks add 2 M N FLOPs (an exp and an add per query row and head) to
    attn_qk. They are no tile work along the keys: the sinks' op costs the sinkless one plus c / (P e_attn)."""
    hw = HW["h100-sxm"]
    tm = time_model("achievable", hw, "graphs")
    m = pm.load_model("gpt-oss-20b")
    B, n = 3, m.N
    tc = {}
    for sinks in (True, False):
        ops = pm.build_ops(m.replace(attention_sinks=sinks), B, T, S, "prefill" if T > 1 else "decode")
        qk = [o for o in ops if o.name == "attn_qk"][0]
        tc[sinks] = float(tm.price([qk], hw, Precision())[0][0])
    c = 2.0 * B * T * n  # M = B T query rows, N heads on one device
    assert tc[True] - tc[False] == pytest.approx(c / (hw.peak("bf16") * hw.achievable.attention_compute["bf16"]),
                                                 rel=1e-6)


def test_a_gpt_oss_decode_step_is_no_faster_at_two_keys_than_at_one():
    """the falsifying example the laws' seed 13 drew (docs/import-and-hardening.md): datasheet model, batch 1"""
    m = pm.load_model("gpt-oss-120b")
    t = engine.evaluate(m, HW["a100-40gb"], np.array([1.0]), np.array([1.0, 2.0]), "decode", "achievable")["latency_s"]
    assert t[0, 1] >= t[0, 0]


def test_weight_only_formats_pay_the_measured_dequantization_and_w8a8_does_not():
    hw, m = HW["a100-80gb-sxm"], pm.load_model("llama-2-7b")
    tm = time_model("achievable", hw, "graphs")
    d = hw.achievable.dequant["int4"]

    def mlp(prec, B):
        ops = pm.build_ops(m, B, 1, 128, "decode", prec)
        (op,) = [o for o in ops if o.name == "mlp_down"]
        return op, tm.price([op], hw, prec)[0]

    op, (tc, tmem, *_) = mlp(Precision("int4-g128"), 1)
    assert tmem == pytest.approx(op.bytes / (hw.memory_bandwidth * hw.achievable.hbm_efficiency * d.bandwidth))
    op, (tc, *_) = mlp(Precision("int4-g128"), 4096)
    e = hw.achievable.gemm_efficiency["bf16"] * d.compute * tm.shape_efficiency(op.gemm)
    assert tc == pytest.approx(op.flops / (hw.peak("bf16") * e))
    h = HW["h100-sxm"]
    ops = pm.build_ops(m, 4096, 1, 128, "decode", Precision("fp8", "fp8"))
    (op,) = [o for o in ops if o.name == "mlp_down"]
    t = time_model("achievable", h, "graphs")
    tc = t.price([op], h, Precision("fp8", "fp8"))[0][0]
    assert tc == pytest.approx(op.flops / (h.peak("fp8") * h.achievable.gemm_efficiency["fp8"] * t.shape_efficiency(op.gemm)))


def test_w8a8_keeps_the_residual_stream_and_the_all_reduces_16_bit():
    m = pm.load_model("llama-3.1-70b")
    ops8 = pm.build_ops(m, 8, 1, 128, "decode", Precision("fp8", "fp8"), layout=Layout(tp=4))
    ops16 = pm.build_ops(m, 8, 1, 128, "decode", Precision("bf16", "bf16"), layout=Layout(tp=4))
    get = lambda ops, n: [o for o in ops if o.name == n][0]  # noqa: E731
    assert get(ops8, "residual").bytes == get(ops16, "residual").bytes
    assert get(ops8, "allreduce_mlp").msg == get(ops16, "allreduce_mlp").msg
    assert get(ops8, "mlp_down").act_read == get(ops16, "mlp_down").act_read / 2  # the GEMM input is fp8


def test_the_host_queues_kernels_ahead_so_a_step_is_the_slower_of_the_two_plus_its_overhead():
    hw, m = HW["h100-sxm"], pm.load_model("qwen2.5-0.5b")
    tm = time_model("achievable", hw, "eager")
    ops = pm.build_ops(m, 1, 1, 128, "decode")
    terms = tm.price(ops, hw, Precision())
    device = sum(float(t[2]) * o.count for o, t in zip(ops, terms))
    host = sum(float(t[4]) * o.count for o, t in zip(ops, terms))
    step = engine.roofline(ops, hw, Precision(), tm=tm)
    assert host > device  # a 0.5B model launched kernel by kernel from Python is host-bound
    assert float(step["time"]) == pytest.approx(max(device, host))


def test_expert_parallel_groups_hold_whole_sequences():
    m, hw = pm.load_model("deepseek-v3"), HW["h200"]
    per_seq = float(engine.per_sequence(m, 1024.0, Precision("fp8", "fp8"))["kv_bytes_per_seq"])
    for B, busiest in ((1, 1), (7, 1), (9, 2), (64, 8)):
        r = engine.evaluate(m, hw, B, 1024, "decode", "roofline", Precision("fp8", "fp8"), layout=Layout(ep=8))
        assert float(r["kv_cache_bytes"].ravel()[0]) == pytest.approx(busiest * per_seq)


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_plan_never_ranks_a_layout_across_nodes_best_on_a_spec_without_network_latency(tmp_path, capsys):
    spec = write(tmp_path, "h200-nolat.yaml", "base: h200\nname: H200 without network latency\nnetwork_latency: null\n")
    t, summary = parallel.plan("deepseek-v3", spec, 16, 4096, [1, 64], weights_dtype="fp8", act_dtype="fp8")
    cross = np.asarray(t["crosses_nodes"], bool)
    assert cross.any() and np.all(t["missing"][cross] == "network_latency")
    assert not np.any(np.asarray(t["pareto"], bool) & cross)
    assert "network_latency" in summary["warning"]
    assert main(["plan", "-m", "deepseek-v3", "-H", spec, "--gpus", "16", "--batch", "1,64",
                 "--weights-dtype", "fp8", "--act-dtype", "fp8"]) == 0
    assert "never ranked" in capsys.readouterr().out


def test_plan_with_a_sourced_network_latency_ranks_one_node_first_at_batch_1():
    t, _ = parallel.plan("deepseek-v3", "h200", 16, 4096, [1], weights_dtype="fp8", act_dtype="fp8",
                            mode="achievable")
    lat = {(int(a), int(b), int(c)): float(x) for a, b, c, x in zip(t["tp"], t["pp"], t["ep"], t["latency_s"])}
    assert lat[(16, 1, 1)] > lat[(8, 1, 1)]  # crossing two nodes costs more than it saves


def test_every_time_carries_its_mode(capsys):
    def recs(*argv):
        assert main([*argv, "--format", "json"]) == 0
        return json.loads(capsys.readouterr().out)

    for mode in ("roofline", "achievable"):
        for argv in (["decode"], ["prefill"], ["request", "--generate", "4"], ["intensity"], ["plan", "--gpus", "2"],
                     ["sweep", "--batch", "1", "--context", "128"], ["serve-sim", "--requests", "4"],
                     ["kv-memory", "--requests", "4"],
                     ["speculative", "--draft", "llama-2-7b", "--target", "llama-2-13b", "--alpha", "0.8",
                      "--gamma", "2"], ["compare", "-m", "llama-2-13b,llama-2-13b-gqa8", "--batch", "1",
                                        "--context", "128"]):
            rows = recs(*argv, "--mode", mode)
            assert rows and all(r["mode"] == mode for r in rows), argv
            if mode == "achievable":
                assert all(r["impl"] == "graphs" for r in rows), argv


def test_the_roofline_table_says_it_is_an_ideal_bound_and_the_achievable_one_that_it_is_an_estimate(capsys):
    assert main(["decode", "--batch", "1"]) == 0
    assert "mode roofline: an ideal bound" in capsys.readouterr().out
    assert main(["decode", "--batch", "1", "--mode", "achievable"]) == 0
    out = capsys.readouterr().out
    assert "mode achievable: an estimate" in out and "not a bound" in out


@pytest.mark.parametrize("field,value,expect", [
    ("hbm_efficiency", "1.2", "outside (0, 1]"),
    ("hbm_efficiency", "0", "outside (0, 1]"),
    ("hbm_efficiency", "-0.3", "outside (0, 1]"),
    ("kernel_latency", "-1 us", "an overhead is a time >= 0"),
    ("gemm_efficiency.bf16", "1.5", "outside (0, 1]"),
    ("link.ring.efficiency", "2", "outside (0, 1]"),
    ("link.ring.latency", "-3 us", "an overhead is a time >= 0"),
])
def test_an_efficiency_outside_0_1_or_a_negative_overhead_exits_2_with_one_line(capsys, field, value, expect):
    code = main(["decode", "--mode", "achievable", "--set", f"achievable.{field}={value}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and expect in err[0] and f"achievable.{field}" in err[0]


def test_a_bad_implementation_profile_exits_2_with_one_line(tmp_path, capsys):
    bad = write(tmp_path, "bad.yaml", "base: graphs\nlaunch: {value: -2 us, source: x}\n")
    for argv, expect in ((["--impl", bad], "launch"), (["--impl", "nosuch"], "not an impl catalog name"),
                         (["--impl", "eager", "--mode", "roofline"], "--impl"),
                         (["-H", "tpu-v5e"], "has no achievable-mode terms")):
        args = ["decode", "--mode", "achievable", *argv] if "--mode" not in argv else ["decode", *argv]
        code = main(args)
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and expect in err[0], (argv, err)


def test_a_profile_field_set_from_the_command_line_prices_the_step(capsys):
    base = pm.decode("llama-2-13b", "h100-sxm", batch=1, mode="achievable")
    slow = pm.decode("llama-2-13b", "h100-sxm", batch=1, mode="achievable", sets={"impl.step_overhead": "1 ms"})
    assert float(slow.latency_s[0] - base.latency_s[0]) == pytest.approx(1e-3, rel=1e-9)
    assert main(["decode", "--set", "impl.step_overhead=1ms"]) == 2  # a profile field needs the achievable mode
    assert "--mode achievable" in capsys.readouterr().err
