"""Multi-device serving: tensor, pipeline and expert parallelism and replicas, with explicit
communication ops (docs/parallelism.md)."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import perfmodel as pm
from perfmodel import api, engine, parallel
from perfmodel.cli import main
from perfmodel.ops import COMM, Layout, Precision, build_ops

# explicit link numbers, so that these laws do not depend on the catalog's sourced values
H100 = pm.load_hardware("h100-sxm").replace(link_bandwidth=450e9, link_latency=2e-6, devices_per_node=8,
                                            network_bandwidth=50e9, network_latency=5e-6)
LLAMA = pm.load_model("llama-2-13b")


def test_one_device_layout_equals_the_single_device_result_exactly():
    a = engine.evaluate(LLAMA, H100, [1, 64, 256], [1024, 8192])
    b = engine.evaluate(LLAMA, H100, [1, 64, 256], [1024, 8192], layout=Layout(1, 1, 1, 1))
    for k in ("latency_s", "throughput_tok_s", "memory_bytes", "weight_bytes", "kv_cache_bytes", "intensity"):
        np.testing.assert_array_equal(a[k], b[k])
    assert np.all(b["comm_time_s"] == 0)


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_weight_bytes_per_device_scale_as_1_over_tp(tp):
    w1 = engine.per_sequence(LLAMA, 1024.0)["weight_bytes"]
    w = engine.per_sequence(LLAMA, 1024.0, layout=Layout(tp=tp))["weight_bytes"]
    norms = (2 * LLAMA.L + 1) * LLAMA.D * 2  # RMSNorm weights are replicated on every device
    assert w == pytest.approx((w1 - norms) / tp + norms, rel=1e-12)


@pytest.mark.parametrize("pp", [1, 2, 4, 5, 8])
def test_weight_bytes_per_device_scale_as_1_over_pp_plus_the_embeddings(pp):
    w1 = engine.per_sequence(LLAMA, 1024.0)["weight_bytes"]
    emb = 2 * LLAMA.V * LLAMA.D * 2 + LLAMA.D * 2  # embedding, LM head, final norm: on the end stages
    w = engine.per_sequence(LLAMA, 1024.0, layout=Layout(pp=pp))["weight_bytes"]
    assert w == pytest.approx((w1 - emb) / pp + emb, rel=1e-12)  # the largest stage holds both ends


@given(st.integers(1, 4096), st.sampled_from([1024, 65536]))
def test_communication_grows_with_p_for_a_fixed_message(B, D):
    m = LLAMA.replace(d_model=D, head_dim=D // 40) if D != LLAMA.D else LLAMA
    times = []
    for tp in (1, 2, 4, 8):
        ops = pm.build_ops(m, B, 1, 1024, "decode", layout=Layout(tp=tp))
        comm = [t for op, (_, _, t) in zip(ops, engine.op_times(ops, H100, pm.Precision(), Layout(tp=tp)))
                if op.kind == COMM]
        times.append(float(sum(np.sum(c) for c in comm)))
    assert times[0] == 0
    assert all(b > a for a, b in zip(times, times[1:]))


def test_an_all_reduce_op_carries_the_ring_volume_and_the_roofline_takes_the_cheapest_algorithm():
    ops = pm.build_ops(LLAMA, 8, 1, 1024, "decode", layout=Layout(tp=4))
    (ar,) = [o for o in ops if o.name == "allreduce_mlp"]
    n, p = 8 * LLAMA.D * 2, 4  # B*T*D bf16 activations on each of 4 devices
    assert ar.msg == n and ar.peers == p and ar.coll == "allreduce" and ar.count == LLAMA.L
    assert ar.comm_bytes == 2 * 3 / 4 * n and ar.comm_steps == 6  # what a ring moves, in 2(p-1) steps
    (_, _, t), = [x for op, x in zip(ops, engine.op_times(ops, H100, pm.Precision(), Layout(tp=4))) if op is ar]
    hop, bw = H100.link_latency, H100.link_bandwidth
    candidates = {"ring": 2 * (p - 1) * hop + 2 * (p - 1) / p * n / bw,  # reduce-scatter + all-gather around a ring
                  "tree": 2 * 2 * hop + 2 * (p - 1) / p * n / bw,  # up and down log2(p) = 2 levels
                  "oneshot": hop + (p - 1) * n / bw,  # read every peer's buffer
                  "twoshot": 2 * hop + 2 * (p - 1) / p * n / bw,  # reduce-scatter, all-gather by direct access
                  "nvls": 2 * hop + n / bw}  # the switch reduces: send the buffer once
    assert t == pytest.approx(min(candidates.values()), rel=1e-12)
    assert t == pytest.approx(candidates["oneshot"], rel=1e-12)  # at 80 kB one step wins


def test_a_tp_group_larger_than_a_node_talks_over_the_network():
    near = engine.link_cost(H100, Layout(tp=8), "tp")
    far = engine.link_cost(H100, Layout(tp=16), "tp")
    assert near[2] == "link" and far[2] == "network" and far[0] < near[0]


def test_replicas_multiply_throughput_and_leave_latency_alone():
    a = engine.evaluate(LLAMA, H100, [1, 64], 1024, layout=Layout(tp=2))
    b = engine.evaluate(LLAMA, H100, [1, 64], 1024, layout=Layout(tp=2, replicas=3))
    np.testing.assert_array_equal(a["latency_s"], b["latency_s"])
    np.testing.assert_allclose(b["throughput_tok_s"], 3 * a["throughput_tok_s"], rtol=1e-15)
    np.testing.assert_array_equal(a["memory_bytes"], b["memory_bytes"])


def test_a_full_pipeline_beats_one_device_on_throughput_but_not_on_latency():
    one = engine.evaluate(LLAMA, H100, 64, 1024)
    pipe = engine.evaluate(LLAMA, H100, 64, 1024, layout=Layout(pp=4))
    bubble = engine.evaluate(LLAMA, H100, 64, 1024, layout=Layout(pp=4, microbatches=1))
    assert pipe["throughput_tok_s"][0, 0] > bubble["throughput_tok_s"][0, 0]
    assert bubble["latency_s"][0, 0] >= one["latency_s"][0, 0]  # one micro-batch: the stages take turns


def test_expert_parallel_splits_the_experts_and_adds_all_to_alls():
    m = pm.load_model("mixtral-8x7b")
    ops = pm.build_ops(m, 64, 1, 1024, "decode", layout=Layout(ep=4))
    names = {o.name for o in ops}
    assert {"alltoall_dispatch", "alltoall_combine"} <= names
    w1 = engine.per_sequence(m, 1024.0)["weight_bytes"]
    w4 = engine.per_sequence(m, 1024.0, layout=Layout(ep=4))["weight_bytes"]
    experts = m.L * m.moe.n_experts * 3 * m.D * m.moe.d_ff_expert * 2
    assert w4 == pytest.approx(w1 - experts * 3 / 4, rel=1e-12)


def test_scaling_book_llama_2_13b_on_8_tpu_v5e():
    # JAX scaling book, "All About Transformer Inference", section "Modeling throughput and latency for
    # LLaMA 2-13B": 8 x TPU v5e, 8192 context, bf16, theoretical (memory-bound) step times
    published = {1: 4.98e-3, 8: 12.13e-3, 16: 20.30e-3, 32: 36.65e-3, 64: 69.33e-3, 240: 249.09e-3}
    v5e = pm.load_hardware("tpu-v5e")
    r = api.decode(LLAMA, v5e, list(published), 8192, mode="simple", tp=8)
    for b, t in zip(r["batch"], r["latency_s"]):
        # the book rounds 819 GB/s to 0.82e12 and 13.0e9 params; agreement to 1%
        assert t == pytest.approx(published[int(b)], rel=0.01)
    fits = dict(zip(r["batch"], r["fits"]))
    assert fits[8] and not fits[16]  # 8 x 16 GB of HBM: batch 16 at 8192 context does not fit


def test_plan_lists_valid_layouts_marks_the_pareto_front_and_finds_the_fewest_devices():
    t, s = parallel.plan("llama-3.1-70b", H100, 8, 4096, [1, 32])
    assert set(zip(t["tp"], t["pp"], t["replicas"])) >= {(8, 1, 1), (1, 8, 1), (1, 1, 8), (2, 4, 1)}
    assert np.all(t["devices"] == 8)
    front = t["pareto"].astype(bool)
    assert front.any() and np.all(t["fits"][front])
    lat, eff = t["latency_s"].astype(float), t["throughput_per_device"].astype(float)
    for i in np.flatnonzero(front):  # nothing that fits beats a front row on both axes
        assert not np.any(t["fits"].astype(bool) & (lat < lat[i]) & (eff > eff[i]))
    assert s["min_devices"] == 2  # 141 GB of bf16 weights need two 80 GB devices
    _, s405 = parallel.plan("llama-3.1-405b", H100, 8, 4096, [1], weights_dtype="fp8", act_dtype="fp8")
    assert s405["min_devices"] == 6


def test_plan_respects_a_latency_limit():
    t, _ = parallel.plan("llama-3.1-70b", H100, 8, 4096, [1, 32], max_latency="15ms")
    assert np.all(t["latency_s"][t["pareto"].astype(bool)] <= 0.015)


def test_layout_errors_are_one_line(capsys):
    for argv, words in ((["decode", "--tp", "3"], "tp=3"), (["decode", "--ep", "2"], "experts"),
                        (["decode", "--pp", "0"], "--pp"), (["plan", "--gpus", "0"], "--gpus"),
                        (["plan", "--max-latency", "soon"], "--max-latency")):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1


def test_a_pipelined_decode_step_reports_the_whole_batchs_flops_and_bytes_not_one_micro_batchs():
    """With m micro-batches the step's time is max(m x one micro-batch's stage time, the whole pipeline's), but
    the FLOPs and bytes it reports (and so its intensity) are those of the whole batch B, as at pp = 1."""
    from perfmodel import engine

    m, hw = pm.load_model("llama-3.1-8b"), pm.load_hardware("h100-sxm")
    piped = engine.evaluate(m, hw, 8, 1024, layout=pm.Layout(pp=2, microbatches=4))
    whole = engine.evaluate(m, hw, 8, 1024)
    micro = engine.evaluate(m, hw, 2, 1024)
    assert piped["flops"][0, 0] == pytest.approx(whole["flops"][0, 0], rel=1e-12)
    assert piped["flops"][0, 0] > 3 * micro["flops"][0, 0]
    assert piped["bytes"][0, 0] > micro["bytes"][0, 0]


def test_deepseek_v3_prefill_deployment_holds_nine_experts_a_gpu_with_32_redundant_over_32():
    """DeepSeek-V3 technical report (arXiv 2412.19437), section 3.4.1, prefilling: EP32 with "32 redundant experts
    ... For each GPU, besides the original 8 experts it hosts, it will also host one additional redundant expert."
    The op list's expert weights a device are 9 experts' (and 8 without the copies)."""
    m = pm.load_model("deepseek-v3")
    one = build_ops(m, 1.0, 1024.0, 1024.0, "prefill", layout=Layout(ep=256))  # one expert a device
    per_expert = sum(float(o.w_stored) * o.count for o in one if o.name.startswith("expert_"))
    for R, held in ((0, 8), (32, 9)):
        ops = build_ops(m, 1.0, 1024.0, 1024.0, "prefill", layout=Layout(ep=32, redundant_experts=R))
        assert sum(float(o.w_stored) * o.count for o in ops if o.name.startswith("expert_")) == \
            pytest.approx(held * per_expert, rel=1e-12)


def test_redundant_experts_from_the_command_line_and_the_api_and_bad_values_in_one_line(capsys):
    """--redundant-experts 32 at --ep 48 lets DeepSeek-R1's 256 experts split (288 slots, 6 a device, the SGLang
    GB200 decode recipes' layout) and says so in a column; 256 alone do not split over 48. A dense model, one
    expert group, a count that does not divide and a negative count are each one line and exit 2."""
    args = ["decode", "-m", "deepseek-r1", "-H", "gb200", "--batch", "64", "--weights-dtype", "nvfp4",
            "--act-dtype", "nvfp4", "--kv-dtype", "fp8", "--ep", "48", "--format", "csv"]
    assert main(args) == 2 and "not divisible by ep=48" in capsys.readouterr().err
    assert main(args + ["--redundant-experts", "32"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert dict(zip(out[0].split(","), out[1].split(",")))["redundant_experts"] == "32"
    t = pm.decode("deepseek-r1", "gb200", batch=64, weights_dtype="nvfp4", act_dtype="nvfp4", kv_dtype="fp8",
                  ep=48, redundant_experts=32)
    assert int(t.redundant_experts[0]) == 32 and "redundant_experts" not in pm.decode("deepseek-r1", ep=8)
    from perfmodel.plots.style import layout_label
    assert layout_label(Layout(ep=48, redundant_experts=32)) == "ep=48 +32 redundant experts (48 devices)"
    assert layout_label(Layout(ep=48)) == "ep=48 (48 devices)"
    for extra, words in ((["-m", "llama-3.1-8b", "--redundant-experts", "4"], "no experts to replicate"),
                         (["-m", "deepseek-r1", "--redundant-experts", "4"], "needs expert parallelism"),
                         (["-m", "deepseek-r1", "--ep", "8", "--redundant-experts", "4"], "256 experts + 4 redundant"),
                         (["-m", "deepseek-r1", "--ep", "8", "--redundant-experts", "-8"], "whole number >= 0")):
        assert main(["decode", *extra]) == 2
        err = capsys.readouterr().err
        assert "--redundant-experts" in err and words in err and len(err.strip().splitlines()) == 1


def test_redundant_experts_take_kv_memory_in_the_budget(capsys):
    """How many users fit: DeepSeek-R1 NVFP4 over 32 GB200s holds one more expert a layer with 32 copies (9, not 8),
    and each GPU's KV cache is smaller by exactly those bytes, so the replica holds fewer tokens and sequences."""
    kw = dict(weights_dtype="nvfp4", act_dtype="nvfp4", kv_dtype="fp8", context=2048, ep=32)
    a, b = pm.budget("deepseek-r1", "gb200", **kw), pm.budget("deepseek-r1", "gb200", redundant_experts=32, **kw)
    m = pm.load_model("deepseek-r1")
    prec = Precision(weights="nvfp4", act="nvfp4", kv="fp8")
    one = build_ops(m, 1.0, 1.0, 2048.0, "decode", prec, layout=Layout(ep=256))  # one expert a device
    expert = sum(float(o.w_stored) * o.count for o in one if o.name.startswith("expert_"))
    assert float(b.weight_bytes[0] - a.weight_bytes[0]) == pytest.approx(expert, rel=1e-9)
    cap, kvt = float(a.memory_capacity[0]), float(a.kv_bytes_per_token[0])
    for t in (a, b):
        assert int(t.max_tokens[0]) == int((cap - float(t.weight_bytes[0])) // kvt) * 32
    assert int(b.max_batch[0]) < int(a.max_batch[0]) and int(b.redundant_experts[0]) == 32
    assert main(["budget", "-m", "deepseek-r1", "--ep", "8", "--redundant-experts", "4"]) == 2
    assert "256 experts + 4 redundant" in capsys.readouterr().err
