"""Each term of the achievable price, pinned by a number a hand can check, and each field of its spec blocks
refused when it is wrong. These were the survivors of the mutation run over efficiency.py and timemodel.py
(docs/mutation.md): code that ran under the laws but that no test held to a value."""
import copy
import dataclasses

import numpy as np
import pytest

import perfmodel as pm
from perfmodel import kernels
from perfmodel.catalog import load_raw
from perfmodel.efficiency import Algorithm, Dequant, achievable_from_dict, impl_from_dict, link_algorithms
from perfmodel.errors import SpecError
from perfmodel.formats import get_format
from perfmodel.ops import COMM, MATMUL, Layout, Op, Precision, build_ops
from perfmodel.specs import load_hardware, load_impl, load_model
from perfmodel.timemodel import TimeModel, link_of, missing_data, steps_and_bytes

H100 = load_hardware("h100-sxm")
AIC = kernels.aic_dir() is not None and (kernels.aic_dir() / "h100_sxm").is_dir()
needs_aic = pytest.mark.skipif(not AIC, reason="the kernels extra (aiconfigurator-core) is not installed")


def tiled(*tiles):
    return dataclasses.replace(TimeModel.roofline(), tiles=tiles, sm_count=132)


# ---------------------------------------------------------------- tiles
def test_the_library_takes_the_tile_that_pads_least_and_a_row_tile_covers_whole_multiples():
    tm = tiled((64, 256), (128, 128))
    # 100 x 128: two 64-row tiles x one 256-col tile = 128 x 256, or one 128 x 128 tile: the second wins
    assert tm.shape_efficiency((100.0, 128.0, 1.0)) == pytest.approx(100 / 128)
    # 100 x 256: 128 x 256 either way (ceil(100/64) = 2 row tiles, not 1)
    assert tm.shape_efficiency((100.0, 256.0, 1.0)) == pytest.approx(100 / 128)


def test_a_product_as_tall_as_the_smallest_tile_runs_tiled_and_a_shorter_one_as_a_skinny_kernel():
    tm = tiled((64, 256), (128, 128))
    # 64 rows is not "below the smallest tile": it runs tiled, 64 x 256 or 128 x 128 for 64 x 128 of work
    assert tm.shape_efficiency((64.0, 128.0, 1.0)) == pytest.approx(0.5)
    assert tm.shape_efficiency((63.0, 128.0, 1.0)) == pytest.approx(1.0)  # skinny: no row padding


def test_grouped_rows_per_expert_round_up_to_whole_rows_and_every_expert_holds_at_least_one_row():
    tm = tiled((64, 128))
    # 10 rows over 4 experts: 2.5 rows each, run as 3-row skinny products: 12 rows of work
    assert tm.shape_efficiency((10.0, 128.0, 4.0)) == pytest.approx(10 / 12)
    # 2 rows over 4 experts reached (in expectation): each expert reached computes one row
    assert tm.shape_efficiency((2.0, 128.0, 4.0)) == pytest.approx(0.5)
    # fewer than one expert reached in expectation (EP spreads few experts over many devices) counts as one
    assert tm.shape_efficiency((32.0, 128.0, 0.5)) == pytest.approx(1.0)
    # 2.5 experts reached in expectation: three experts' products run, 4 rows each
    assert tm.shape_efficiency((10.0, 128.0, 2.5)) == pytest.approx(10 / 12)


# ---------------------------------------------------------------- collectives
def _coll(coll, msg, peers, link):
    op = pm.Op(f"{coll}_x", "", 1, COMM, coll=coll, msg=np.asarray(msg, float), peers=peers)
    op.link = link
    return op


def test_a_one_step_all_to_all_across_nodes_pays_one_network_hop_and_no_link_hop():
    lay = Layout(ep=16)
    t, sent, kind = TimeModel.roofline().collective(_coll("alltoall", [1e6], 16, "ep"), H100, lay)
    assert kind == "network" and H100.link_latency > 0
    direct = H100.network_latency + 15 / 16 * 1e6 / H100.network_bandwidth
    assert float(t[0]) == pytest.approx(direct, rel=1e-12) and float(sent[0]) == pytest.approx(15 / 16 * 1e6)


@pytest.mark.parametrize("E, m", [(8, 2), (8, 4), (12, 3), (16, 2)])
def test_a_token_s_remote_nodes_are_the_mean_over_every_set_of_experts_it_can_pick(E, m):
    """remote_nodes(E, k, m): over all C(E, k) equally likely expert sets, the other nodes (of m, E/m experts each)
    holding at least one of them, counted from node 0, on average."""
    from itertools import combinations

    from perfmodel.timemodel import remote_nodes

    for k in range(1, 5):
        sets = list(combinations(range(E), k))
        mean = sum(len({e // (E // m) for e in c} - {0}) for c in sets) / len(sets)
        assert remote_nodes(E, k, m) == pytest.approx(mean, rel=1e-12)
    assert remote_nodes(E, 3, 1) == 0.0  # one node: nothing crosses


def test_the_roofline_expert_all_to_all_across_nodes_sends_a_token_once_to_each_remote_node():
    """DeepEP's internode dispatch sends a token over the network once to each other node holding one of its k
    experts and fans it out over NVLink there; the bound counts those copies, not k x (p - 1)/p of them."""
    from perfmodel.timemodel import remote_nodes

    m = load_model("deepseek-r1")
    ops = [op for op in build_ops(m, 1.0, 512.0, 512.0, "prefill", Precision(), layout=Layout(ep=16))
           if op.coll == "alltoall"]
    assert len(ops) == 2
    for op in ops:
        t, sent, kind = TimeModel.roofline().collective(op, H100, Layout(ep=16))
        k, E = m.moe.n_active, m.moe.n_experts
        copies = remote_nodes(E, k, 2)  # 16 GPUs: two nodes of 8
        assert kind == "network" and 0.99 < copies < 1.0
        assert float(sent) == pytest.approx(float(op.msg) / k * copies, rel=1e-12)
        assert float(t) == pytest.approx(H100.network_latency + float(sent) / H100.network_bandwidth, rel=1e-12)
    for op in (op for op in build_ops(m, 1.0, 512.0, 512.0, "prefill", Precision(), layout=Layout(ep=8))
               if op.coll == "alltoall"):  # inside one node: every remote copy, over NVLink
        _, inside, kind8 = TimeModel.roofline().collective(op, H100, Layout(ep=8))
        assert kind8 == "link" and float(inside) == pytest.approx(7 / 8 * float(op.msg), rel=1e-12)


def test_tensorrt_llm_s_nvlink_all_to_all_prices_only_a_group_inside_one_nvlink_domain():
    """On an HGX B200 (8 GPUs a node) the NVLink kernels (borrowed from GB200) price an ep 8 all-to-all; ep 16
    spans two nodes, which no NVLink kernel reaches: the measured DeepEP internode table or the datasheet model."""
    got = {}
    for ep in (8, 16):
        r = pm.intensity("deepseek-r1", "b200", batch=1, context=4096, phases=("prefill",), ep=ep, mode="achievable",
                         impl="trtllm-1.3")
        got[ep] = {str(o).split("[")[0]: str(p) for o, p in zip(r["op"], r["priced_by"]) if "alltoall" in str(o)}
    assert set(got[8]) == {"alltoall_dispatch", "alltoall_combine"} == set(got[16])
    assert all(v.startswith("AIConfigurator") for v in got[8].values())
    assert all(v == "datasheet" for v in got[16].values())


def test_across_nodes_the_measured_latency_adds_the_intra_node_ring_only_when_a_node_holds_two_or_more():
    tm = TimeModel.achievable(H100, load_impl("graphs"))
    net, link = H100.achievable.network, H100.achievable.link
    n = 1e3
    ring_steps = lambda q: steps_and_bytes("allreduce", "ring", q, 1.0)[0]  # noqa: E731
    tree_steps = lambda q: steps_and_bytes("allreduce", "tree", q, 1.0)[0]  # noqa: E731
    # tp = 16: 8 per node, 2 nodes; the network ring's latency at 2 nodes plus the link ring's at 8 devices
    t, _, kind = tm.collective(_coll("allreduce", [n], 16, "tp"), H100, Layout(tp=16))
    want = []
    for name, steps in (("ring", ring_steps), ("tree", tree_steps)):
        if name not in net:
            continue
        a = net[name]
        s, b = steps_and_bytes("allreduce", name, 16.0, n)
        inter = steps(2.0)
        floor = inter * H100.network_latency + max(s - inter, 0.0) * H100.link_latency
        lat = a.at(2.0, steps) + link["ring"].at(8.0, ring_steps)
        want.append(max(lat, floor) + b / (a.efficiency * H100.network_bandwidth))
    assert kind == "network" and float(t[0]) == pytest.approx(min(want), rel=1e-12)
    # an ep group of 2 with tp = 8 beside it: one member per node, so no intra-node part
    t, sent, kind = tm.collective(_coll("alltoall", [n], 2, "ep"), H100, Layout(tp=8, ep=2))
    want = []
    for name in ("ring", "direct"):
        if name not in net:
            continue
        a = net[name]
        s, b = steps_and_bytes("alltoall", name, 2.0, n)
        sc = (lambda q, name=name: steps_and_bytes("alltoall", name, q, 1.0)[0]) if name == "ring" else None
        want.append(max(a.at(2.0, sc), s * H100.network_latency) + b / (a.efficiency * H100.network_bandwidth))
    assert kind == "network" and float(t[0]) == pytest.approx(min(want), rel=1e-12)


def test_a_spec_without_a_link_hop_pays_nothing_for_its_intra_node_steps():
    hw = H100.replace(link_latency=None)
    t, _, _ = TimeModel.roofline().collective(_coll("allreduce", [8.0], 16, "tp"), hw, Layout(tp=16))
    n, bw = 8.0, hw.network_bandwidth
    assert float(t[0]) == pytest.approx(2 * hw.network_latency + 2 * 15 / 16 * n / bw, rel=1e-12)


def test_beyond_its_largest_measured_group_a_rings_latency_grows_with_its_steps():
    ring = Algorithm(((2, 4e-6), (4, 6e-6)), 0.5)
    tm = dataclasses.replace(TimeModel.achievable(H100, load_impl("graphs")), link={"ring": ring})
    t, _, _ = tm.collective(_coll("allreduce", [8.0], 8, "tp"), H100, Layout(tp=8))
    assert float(t[0]) == pytest.approx(max(6e-6 * 14 / 6, 14 * H100.link_latency) + 1.75 * 8.0 / (0.5 * H100.link_bandwidth),
                                        rel=1e-12)


def test_two_devices_a_node_pay_the_intra_node_ring_too():
    hw = H100.replace(devices_per_node=2)
    net, link = hw.achievable.network, hw.achievable.link
    tm = dataclasses.replace(TimeModel.achievable(hw, load_impl("graphs")), network={"ring": net["ring"]})
    ring_steps = lambda q: steps_and_bytes("allreduce", "ring", q, 1.0)[0]  # noqa: E731
    t, _, kind = tm.collective(_coll("allreduce", [8.0], 4, "tp"), hw, Layout(tp=4))
    s, b = steps_and_bytes("allreduce", "ring", 4.0, 8.0)
    floor = ring_steps(2.0) * hw.network_latency + (s - ring_steps(2.0)) * hw.link_latency
    lat = net["ring"].at(2.0, ring_steps) + link["ring"].at(2.0, ring_steps)
    assert kind == "network" and lat > floor
    assert float(t[0]) == pytest.approx(lat + b / (net["ring"].efficiency * hw.network_bandwidth), rel=1e-12)


def test_an_algorithm_serves_messages_up_to_and_including_its_max_bytes():
    slow_ring, fast = Algorithm(((0, 1e-3),), 0.5), Algorithm(((0, 1e-6),), 1.0, max_bytes=1024.0)
    tm = dataclasses.replace(TimeModel.achievable(H100, load_impl("graphs")), link={"ring": slow_ring, "oneshot": fast})
    t, _, _ = tm.collective(_coll("allreduce", [1024.0, 1025.0], 8, "tp"), H100, Layout(tp=8))
    assert t[0] == pytest.approx(max(1e-6, H100.link_latency) + 7 * 1024.0 / H100.link_bandwidth, rel=1e-12)
    ring = max(1e-3, 14 * H100.link_latency) + 1.75 * 1025.0 / (0.5 * H100.link_bandwidth)
    assert t[1] == pytest.approx(ring, rel=1e-12)


def test_without_communication_a_collective_costs_nothing_not_even_its_launch():
    ops = build_ops(load_model("llama-3.1-8b"), 8.0, 1.0, 1024.0, "decode", Precision(), layout=Layout(tp=2))
    tm = TimeModel.achievable(H100, load_impl("eager"))
    assert tm.launch > 0
    comm = [r for op, r in zip(ops, tm.price(ops, H100, Precision(), Layout(tp=2), comm=False)) if op.kind == COMM]
    assert comm and all(r == (0.0, 0.0, 0.0, 0.0, 0.0, 0.0) for r in comm)


# ---------------------------------------------------------------- what the price adds up
def test_a_w8a8_gemm_streams_its_weights_at_its_kernels_measured_rate():
    prec = Precision("fp8", "fp8", "fp8")
    op = Op("mlp_down", "", 1, MATMUL, flops=2.0 * 8 * 4096 * 4096, w_read=4096.0 * 4096, wfmt="fp8")
    op.gemm = (8.0, 4096.0, 1.0)
    base = dataclasses.replace(TimeModel.achievable(H100, load_impl("graphs")), dequant={})
    half = dataclasses.replace(base, dequant={"fp8": Dequant(0.5, 1.0)})
    ((_, m0, *_),) = base.price([op], H100, prec)
    ((_, m1, *_),) = half.price([op], H100, prec)
    assert m1 == pytest.approx(2 * m0, rel=1e-12)


def test_a_packing_blas_moves_the_weights_again_and_says_so_in_the_bytes():
    hw = H100.replace(gemm_weight_passes=3.0)
    for rows, extra in ((1.0, 0.0), (8.0, 2.0)):  # one row streams the weights once: nothing to pack
        op = Op("mlp_down", "", 1, MATMUL, flops=2.0 * rows * 4096 * 4096, w_read=2.0 * 4096 * 4096,
                act_read=2.0 * rows * 4096, wfmt="bf16")
        op.rows, op.gemm = rows, (rows, 4096.0, 1.0)
        ((_, _, _, b, *_),) = TimeModel.roofline().price([op], hw, Precision())
        assert b == pytest.approx(op.bytes + extra * op.w_read, rel=1e-12)


def _measured_csv(tmp_path):
    from tests.test_kernels import _results_csv

    rows = [(m, n, k, 1.5) for m in (1, 64) for n in (1024, 4096) for k in (1024, 4096)]
    return _results_csv(tmp_path, H100, rows)


def test_a_measured_gemm_is_its_measured_time_with_no_calibrated_term_added_again(tmp_path):
    """The table's time already holds the kernel's fixed cost and any packing pass of the BLAS it measured."""
    impl = dataclasses.replace(load_impl("graphs"), kernel_tables=str(_measured_csv(tmp_path)))
    op = Op("mlp_down", "", 1, MATMUL, flops=2.0 * 64 * 4096 * 4096, w_read=2.0 * 4096 * 4096,
            act_read=2.0 * 64 * 4096, act_write=2.0 * 64 * 4096, wfmt="bf16")
    op.rows, op.gemm = 64.0, (64.0, 4096.0, 1.0)
    ideal = max(op.flops / H100.peak("bf16"), op.bytes / H100.memory_bandwidth)
    for ko, passes in ((None, None), (3e-6, None), (None, 2.0)):
        hw = H100.replace(kernel_overhead=ko, gemm_weight_passes=passes)
        src = []
        ((_, tmem, t, *_),) = TimeModel.achievable(hw, impl).price([op], hw, Precision(), sources=src)
        assert src == [impl.kernel_tables]
        assert t == pytest.approx(1.5 * ideal, rel=1e-12) and tmem == pytest.approx(1.5 * op.bytes / hw.memory_bandwidth)


@needs_aic
def test_fp8_gemms_are_priced_from_the_engines_fp8_table():
    tm = TimeModel.achievable(H100, load_impl("vllm-0.24"))
    prec = Precision("fp8", "fp8", "fp8")
    ops = [op for op in build_ops(load_model("llama-3.1-8b"), 64.0, 1.0, 1024.0, "decode", prec) if op.kind == MATMUL]
    src = []
    tm.price(ops, H100, prec, sources=src)
    assert all(s.startswith("AIConfigurator") for s in src), src


@needs_aic
@pytest.mark.parametrize("gpu, impl", [("h100-sxm", "vllm-0.24"), ("b200", "sglang-0.5"), ("b200", "trtllm-1.3"),
                                       ("l40s", "trtllm-1.3")])
def test_a_measured_all_reduce_is_the_engines_own_time_on_a_switched_nvlink_platform(gpu, impl):
    """On an NVLink switch (HGX: the spec lists one-shot) the engine's all-reduce call, timed over its whole range,
    prices the op, even where the datasheet model is faster: on B200 its one-shot latency (NCCL 2.27's symmetric-memory
    kernel, 3 us) undercuts every engine's measured call at small messages (5-8 us). A PCIe card's
    table is one server's topology: there the faster of the two (on L40S AIConfigurator's server all-reduces 2 MB in
    0.64 ms, the model in 0.29 ms)."""
    hw = load_hardware(gpu)
    tm = TimeModel.achievable(hw, load_impl(impl))
    p = 4 if gpu == "l40s" else 8
    op = _coll("allreduce", np.geomspace(1e3, 1e8, 6), p, "tp")
    op.name = "allreduce_mlp"
    src = []
    ((_, _, t, *_),) = tm.price([op], hw, Precision(), Layout(tp=p), sources=src)
    modelled, _, _ = tm.collective(op, hw, Layout(tp=p))
    measured = tm.kernels_table.allreduce_time(p, op.msg)
    assert src[0].startswith("AIConfigurator")
    np.testing.assert_allclose(t, np.minimum(modelled, measured) if gpu == "l40s" else measured, rtol=1e-12)
    if gpu != "h100-sxm":  # where the two differ in the direction the rule decides
        assert measured[0 if gpu == "b200" else -1] > modelled[0 if gpu == "b200" else -1]


@needs_aic
def test_the_all_reduce_tables_count_16_bit_elements_so_a_message_of_n_bytes_is_read_at_n_over_2_elements(tmp_path,
                                                                                                         monkeypatch):
    """AIConfigurator's collector all-reduces a [size / 4096, 4096] tensor of `size` bf16 elements and writes `size`
    as message_size (collector/network/collect_all_reduce.py): the table's point at 2^20 elements is the time of a
    2 MiB message."""
    pytest.importorskip("pyarrow")
    import pandas as pd

    d = tmp_path / "h100_sxm" / "comm" / "vllm" / "0.24.0"
    d.mkdir(parents=True)
    rows = [("vllm", "0.24.0", "H100", "all_reduce", "custom", "bfloat16", 8, n, t, "vllm_graph")
            for n, t in ((1024, 0.005), (2 ** 20, 0.02))]
    pd.DataFrame(rows, columns=["framework", "version", "device", "op_name", "kernel_source", "allreduce_dtype",
                                "num_gpus", "message_size", "latency", "backend"]).to_parquet(
        d / "custom_allreduce_perf.parquet")
    monkeypatch.setenv("PERFMODEL_AIC_DATA", str(tmp_path))
    ks = kernels._load_aic(H100, "h100_sxm", "vllm", "0.24.0")
    assert float(ks.allreduce_time(8, 2.0 * 2 ** 20)) == pytest.approx(20e-6)
    assert float(ks.allreduce_time(8, 2048.0)) == pytest.approx(5e-6)


@needs_aic
@pytest.mark.parametrize("ep, per_node, nodes", [(8, 8, 1), (16, 8, 2), (8, 6, 2), (2, None, 2)])
def test_an_ep_all_to_all_across_n_nodes_costs_deepeps_time_measured_on_n_nodes(ep, per_node, nodes):
    """nodes = ceil(ep / devices_per_node); a spec without devices_per_node has one device a node."""
    m = load_model("deepseek-v3")
    hw = H100.replace(devices_per_node=per_node)
    # SGLang 0.5.10's tables hold DeepEP on 1, 2, 4 and 8 nodes of H100 (0.5.14's on one only)
    tm = TimeModel.achievable(hw, dataclasses.replace(load_impl("sglang-0.5"), engine_version="0.5.10"))
    assert "0.5.10" in tm.kernels_table.source
    lay = Layout(ep=ep)
    ops = [op for op in build_ops(m, 4.0, 1.0, 1024.0, "decode", Precision(), layout=lay) if op.coll == "alltoall"]
    assert {op.name.endswith("dispatch") for op in ops} == {True, False}
    src = []
    for op, (_, _, t, *_) in zip(ops, tm.price(ops, hw, Precision(), lay, sources=src)):
        M, D, _, topk, E, _, _ = op.moe
        phase = "dispatch" if op.name.endswith("dispatch") else "combine"
        want = tm.kernels_table.alltoall_time(phase, D, topk, E, nodes, M)
        assert want is not None and float(t) == pytest.approx(float(want), rel=1e-12)
        assert want != tm.kernels_table.alltoall_time(phase, D, topk, E, 3 - nodes, M)
    assert all(s.startswith("AIConfigurator") for s in src)


@needs_aic
@pytest.mark.parametrize("gpu, prec, tables", [
    ("h100-sxm", Precision(), "bfloat16"),
    ("h100-sxm", Precision("fp8", "fp8"), ["fp8_block", "fp8"]),  # fp8 MoE checkpoints are block-scaled
    ("h100-sxm", Precision("fp8"), ["fp8_block", "fp8"]),  # 16-bit activations: the fp8 kernel, at its fp8 peak
    ("h100-sxm", Precision("int4-g128"), "int4_wo"),
    ("b200", Precision("mxfp4"), "w4a16_mxfp4"),  # fp4 experts, 16-bit activations
    ("b200", Precision("nvfp4", "fp4", "bf16"), "nvfp4"),  # fp4 experts and fp4 activations: W4A4
])
def test_a_fused_moe_op_takes_the_measured_kernel_of_its_weight_format(gpu, prec, tables):
    """Both expert GEMMs take max(r, 1) x their own ideal time, r that of the engine's fused MoE kernel for the
    checkpoint's weight format, at the layer's shape and tokens, relative to that kernel's peak."""
    from perfmodel.kernels import _PEAK

    hw = load_hardware(gpu)
    tm = TimeModel.achievable(hw, load_impl("vllm-0.24"))
    ks = tm.kernels_table
    dt = tables if isinstance(tables, str) else tables[0]
    peak = hw.peak(_PEAK[dt]) if _PEAK[dt] in hw.peak_flops else hw.peak(prec.formats()[1].peak)
    ratios = []
    # decode at 1, 64 and 1,024 sequences (bandwidth-bound experts), and a 16,384-token prefill (compute-bound)
    for B, T, phase in ((1.0, 1.0, "decode"), (64.0, 1.0, "decode"), (1024.0, 1.0, "decode"), (4.0, 4096.0, "prefill")):
        ops = [op for op in build_ops(load_model("qwen3-30b-a3b"), B, T, max(T, 2048.0), phase, prec)
               if op.kind == MATMUL and op.moe is not None]
        assert len(ops) == 2  # the gate-up and the down GEMM of the experts
        src = []
        for op, (_, _, t, *_) in zip(ops, tm.price(ops, hw, prec, sources=src)):
            M, D, F, topk, E, tp, ep = op.moe
            r = float(ks.moe_ratio(tables, (D, F, topk, E, tp, ep), M, hw=hw))
            ideal = max(op.flops / peak, op.bytes / hw.memory_bandwidth)
            assert float(t) == pytest.approx(max(r, 1.0) * ideal, rel=1e-9), (B, op.name)
            ratios.append(r)
        assert all(s.startswith("AIConfigurator") for s in src)
    assert len(set(ratios)) > 1


@needs_aic
@pytest.mark.parametrize("prec, table", [
    (Precision(), "bfloat16"), (Precision("fp8", "fp8"), "fp8"), (Precision("nvfp4", "fp4", "bf16"), "nvfp4"),
    (Precision("int4-g128", "fp8"), "fp8"),  # W4A8 computes in fp8
    (Precision("int4-g128"), None), (Precision("fp8"), None),  # weight-only: no dense table, the datasheet model
])
def test_a_dense_gemm_takes_the_measured_table_of_what_it_computes_in(prec, table):
    hw = load_hardware("b200")
    tm = TimeModel.achievable(hw, load_impl("vllm-0.24"))
    ops = [op for op in build_ops(load_model("llama-3.1-8b"), 32.0, 1.0, 2048.0, "decode", prec)
           if op.kind == MATMUL and op.name != "lm_head"]
    src = []
    for op, (_, _, t, *_) in zip(ops, tm.price(ops, hw, prec, sources=src)):
        if table is None:
            continue
        rows, cols, _ = op.gemm
        r = float(tm.kernels_table.gemm_ratio(table, rows, cols, op.flops / (2.0 * rows * cols)))
        ideal = max(op.flops / hw.peak(prec.formats()[1].peak), op.bytes / hw.memory_bandwidth)
        assert float(t) == pytest.approx(max(r, 1.0) * ideal, rel=1e-9), op.name
    assert set(src) == ({"datasheet"} if table is None else {tm.kernels_table.source})


class Recorder:
    """A kernel table that answers every lookup with ratio r (None for the dtypes in `missing`) and keeps the
    arguments it was asked with."""

    def __init__(self, r, missing=()):
        self.r, self.missing, self.calls, self.source = r, set(missing), [], "recorder"

    def _answer(self, *call):
        self.calls.append(call)
        return None if call[1] in self.missing else self.r

    def gemm_ratio(self, dt, m, n, k):
        return self._answer("gemm", dt, float(m), float(n), float(k))

    def moe_ratio(self, dts, shape, tokens, backends=None, hw=None):
        return self._answer("moe", dts if isinstance(dts, str) else tuple(dts), tuple(shape), tokens)

    def moe_dtype(self, dts, shape, backends=None):  # the first table asked for answers (as at equal distance)
        return dts if isinstance(dts, str) else list(dts)[0]

    def attn_ratio(self, phase, kvd, heads, B, L):
        return self._answer("attn", kvd, phase, tuple(heads), float(B), float(L))

    def mla_ratio(self, phase, kvd, Nq, B, L):
        return self._answer("mla", kvd, phase, Nq, float(B), float(L))


def _first(kind, model="llama-3.1-8b", B=8.0, T=1.0, S=2048.0, phase="decode", prec=Precision(), lay=None):
    ops = build_ops(load_model(model), B, T, S, phase, prec, layout=lay)
    return next(op for op in ops if (op.attn is not None if kind == "attn" else
                                     op.kind == MATMUL and (op.moe is not None) == (kind == "moe")))


def test_a_measured_ratio_below_one_is_held_at_one_so_the_roofline_stays_a_bound():
    """A benchmark that reruns one small shape reads its operands from L2 (r < 1 happens, e.g. H100 TensorRT-LLM
    fp8 context attention 0.78): the op is priced at its bound, never below."""
    from perfmodel.timemodel import _measured_attention, _measured_gemm

    bf16 = Precision().formats()
    assert _measured_gemm(Recorder(0.5), _first("gemm"), bf16[0], bf16[1], H100) == (1.0, H100.peak("bf16"))
    moe = _first("moe", "qwen3-30b-a3b")
    assert _measured_gemm(Recorder(0.5), moe, bf16[0], bf16[1], H100)[0] == 1.0
    assert _measured_attention(Recorder(0.5), _first("attn"), bf16[2], 1e15) == (1.0, 1e15)


def test_an_fp8_gemm_without_a_per_tensor_table_takes_the_block_scaled_one():
    from perfmodel.timemodel import _measured_gemm

    w, a, *_ = Precision("fp8", "fp8").formats()
    rec = Recorder(1.7, missing={"fp8_static", "fp8"})
    assert _measured_gemm(rec, _first("gemm", prec=Precision("fp8", "fp8")), w, a, H100) == (1.7, H100.peak("fp8"))
    assert [c[1] for c in rec.calls] == ["fp8_static", "fp8", "fp8_block"]


def test_block_scaled_fp8_weights_take_the_block_scaled_table_first_and_per_tensor_fp8_the_per_tensor_one():
    """formats "fp8-b128" (DeepSeek-V3's 128 x 128 block scales): engines run such a checkpoint with block-scaled
    GEMMs, a table of its own (AIConfigurator's fp8_block); each order falls back to the other table."""
    from perfmodel.timemodel import _measured_gemm

    for wname, order in (("fp8-b128", ["fp8_block", "fp8"]), ("fp8", ["fp8_static", "fp8", "fp8_block"])):
        prec = Precision(wname, "fp8")
        w, a, *_ = prec.formats()
        op = _first("gemm", prec=prec)
        assert op.name not in ("o_proj", "mlp_down")
        for i in range(len(order)):  # each table missing in turn: the next one answers
            rec = Recorder(1.3, missing=set(order[:i]))
            assert _measured_gemm(rec, op, w, a, H100) == (1.3, H100.peak("fp8"))
            assert [c[1] for c in rec.calls] == order[: i + 1]


def test_a_per_tensor_fp8_gemm_fed_an_fp8_input_takes_the_table_without_its_quantize_kernel():
    """Static per-tensor fp8 (ModelOpt's checkpoints): o_proj and the MLP's down projection receive their input in
    fp8 (AIConfigurator's low_precision_input), so they take fp8_static_lp; the others fp8_static."""
    from perfmodel.timemodel import _measured_gemm

    prec = Precision("fp8", "fp8")
    w, a, *_ = prec.formats()
    seen = {}
    for op in build_ops(load_model("llama-3.1-8b"), 4.0, 1.0, 512.0, "decode", prec):
        if op.name in ("qkv_proj", "o_proj", "mlp_up_gate", "mlp_down"):
            rec = Recorder(1.2)
            _measured_gemm(rec, op, w, a, H100)
            seen[op.name] = rec.calls[0][1]
    assert seen == {"qkv_proj": "fp8_static", "o_proj": "fp8_static_lp", "mlp_up_gate": "fp8_static",
                    "mlp_down": "fp8_static_lp"}


@pytest.mark.parametrize("act", ["fp8", "bf16"])
def test_a_gemm_whose_weights_stay_in_16_bits_is_priced_from_the_16_bit_table_at_the_16_bit_peak(act):
    """The router and the LM head keep 16-bit weights in an fp8 model: their kernel computes in 16 bits. Priced from
    the fp8 table, the router of DeepSeek-R1 took 33 us a layer at 4 sequences on a B200 (AIConfigurator's own
    breakdown: 5.5 us), the fp8 table's ratio applied to twice the bytes it was measured on."""
    from perfmodel.timemodel import _measured_gemm

    prec = Precision("fp8", act)
    w, a, *_ = prec.formats()
    router = next(op for op in build_ops(load_model("deepseek-r1"), 4.0, 1.0, 1536.0, "decode", prec, layout=Layout(8))
                  if op.name == "router")
    rf = get_format(router.wfmt)
    assert rf.bits == 16
    rec = Recorder(1.4)
    assert _measured_gemm(rec, router, rf, a, H100) == (1.4, H100.peak("bf16"))
    assert [c[1] for c in rec.calls] == ["bfloat16"]


@pytest.mark.parametrize("act, tables, peak", [
    ("fp4", ("w4a8_mxfp4_mxfp8", "w4a16_mxfp4"), "fp8"),  # no MXFP4 x FP4 kernel: the engines run MXFP8 inputs
    ("fp8", ("w4a8_mxfp4_mxfp8", "w4a16_mxfp4"), "fp8"),
    ("bf16", ("w4a16_mxfp4",), "bf16"),
])
def test_mxfp4_experts_with_8_or_4_bit_activations_are_priced_from_the_mxfp4_by_mxfp8_kernel(act, tables, peak):
    """gpt-oss's MXFP4 experts: with fp4 or fp8 activations the engines run FlashInfer's / TensorRT-LLM's MXFP4 x
    MXFP8 kernel (W4A8), the MXFP4 x BF16 table where its shape is nearer; never the NVFP4 W4A4 tables of other
    models' shapes. The ratio is to the ideal at the peak of the table that priced it."""
    from perfmodel.timemodel import _measured_gemm

    b200 = load_hardware("b200")
    prec = Precision("nvfp4", act)
    op = _first("moe", "gpt-oss-120b", prec=prec)
    w, a = get_format(op.wfmt), prec.formats()[1]
    assert w.name == "mxfp4"
    rec = Recorder(1.6)
    assert _measured_gemm(rec, op, w, a, b200) == (1.6, b200.peak(peak))
    assert rec.calls[0][1] == tables


def test_a_product_without_a_gemm_shape_or_with_several_instances_has_no_dense_table():
    from perfmodel.timemodel import _measured_gemm

    w, a, *_ = Precision().formats()
    op = Op("mlp_down", "", 1, MATMUL, flops=2.0 * 64 * 4096 * 4096, w_read=2.0 * 4096 * 4096, wfmt="bf16")
    assert op.gemm is None and _measured_gemm(Recorder(1.5), op, w, a, H100) is None
    op.gemm = (64.0, 4096.0, 4.0)  # four per-head products: a batched kernel no dense table measures
    assert _measured_gemm(Recorder(1.5), op, w, a, H100) is None
    op.gemm = (64.0, 4096.0, 1.0)
    assert _measured_gemm(Recorder(1.5), op, w, a, H100) == (1.5, H100.peak("bf16"))


def test_decode_attention_over_one_key_looks_up_one_key_and_its_batch():
    from perfmodel.timemodel import _measured_attention

    rec = Recorder(1.5)
    op = _first("attn", S=1.0)
    _measured_attention(rec, op, Precision().formats()[2], 1e15)
    (_, _, phase, heads, B, L), = rec.calls
    assert phase == "generation" and (B, L) == (8.0, 1.0) and heads == (32, 8, 128)


def test_a_chunk_after_a_cached_prefix_is_looked_up_at_the_prompt_of_equal_pairs():
    """The context tables measure prompts without a prefix: a prompt of L tokens has L (L + 1) / 2 causal pairs. A
    chunk of T tokens over klen keys has T klen - T (T - 1) / 2; it is looked up at the L with as many, which is T
    itself when there is no prefix."""
    from perfmodel.timemodel import _measured_attention

    kf = Precision().formats()[2]
    for T, S in ((512.0, 512.0), (4.0, 8192.0), (256.0, 4096.0)):
        rec = Recorder(1.5)
        op = _first("attn", B=1.0, T=T, S=S, phase="prefill")
        _measured_attention(rec, op, kf, 1e15)
        (_, _, phase, _, B, L), = rec.calls
        pairs = T * S - T * (T - 1.0) / 2.0
        assert phase == "context" and B == pytest.approx(1.0)
        assert L * (L + 1.0) / 2.0 == pytest.approx(pairs, rel=1e-12)
        assert S > T or L == pytest.approx(T, rel=1e-12)


def test_a_chunk_after_a_prefix_takes_at_least_the_decode_kernel_over_its_cache():
    """With the device's bandwidth given, a chunk over a cached prefix costs at least what the generation table
    says streaming its keys costs (r_gen x kv_read / BW), and at least the equal-pairs prompt's r x FLOPs / peak;
    a prompt with no prefix keeps r x its ideal time."""
    from perfmodel.timemodel import _measured_attention

    class Two(Recorder):  # context ratio 2, generation ratio 40
        def attn_ratio(self, phase, kvd, heads, B, L):
            super().attn_ratio(phase, kvd, heads, B, L)
            return 2.0 if phase == "context" else 40.0

    kf, peak, bw = Precision().formats()[2], 1e15, 3.35e12
    op = _first("attn", B=1.0, T=4.0, S=8192.0, phase="prefill")
    r, p = _measured_attention(Two(1.0), op, kf, peak, bw)
    ideal = max(op.flops / peak, op.bytes / bw)
    assert p == peak and op.kv_read > 0
    assert float(r) * ideal == pytest.approx(max(2.0 * op.flops / peak, 40.0 * op.kv_read / bw), rel=1e-12)
    assert _measured_attention(Two(1.0), op, kf, peak)[0] == 2.0  # no bandwidth: the equal-pairs prompt alone
    plain = _first("attn", B=1.0, T=512.0, S=512.0, phase="prefill")
    assert _measured_attention(Two(1.0), plain, kf, peak, bw)[0] == 2.0


def test_the_decode_kernel_floor_applies_only_after_a_prefix_and_its_ratio_is_at_least_one():
    """A prompt with no prefix (klen = T) is the context table's own shape: no floor, even a 4-token prompt whose
    cache read at the generation ratio would outlast its FLOPs. After a prefix the floor is max(r_gen, 1) x kv_read /
    BW."""
    from perfmodel.timemodel import _measured_attention

    class Ratios(Recorder):
        def __init__(self, gen):
            super().__init__(1.0)
            self.gen = gen

        def attn_ratio(self, phase, kvd, heads, B, L):
            super().attn_ratio(phase, kvd, heads, B, L)
            return 2.0 if phase == "context" else self.gen

    kf, peak, bw = Precision().formats()[2], 1e15, 3.35e12
    short = _first("attn", B=1.0, T=4.0, S=4.0, phase="prefill")
    assert 40.0 * short.kv_read / bw > 2.0 * short.flops / peak  # the floor would win, were it applied
    assert _measured_attention(Ratios(40.0), short, kf, peak, bw)[0] == 2.0
    op = _first("attn", B=1.0, T=4.0, S=8192.0, phase="prefill")
    ideal = max(op.flops / peak, op.bytes / bw)
    r, _ = _measured_attention(Ratios(1.5), op, kf, peak, bw)
    assert 1.5 * op.kv_read / bw > max(2.0 * op.flops / peak, ideal)  # the floor is what this case prices
    assert float(r) * ideal == pytest.approx(1.5 * op.kv_read / bw, rel=1e-12)
    # below 1 the floor is under the op's ideal time (kv_read <= bytes), which the ratio's own floor of 1 keeps
    assert float(_measured_attention(Ratios(0.5), op, kf, peak, bw)[0]) == 1.0


def test_one_kv_head_a_device_is_looked_up_as_one():
    from perfmodel.timemodel import _measured_attention

    for phase, T, S in (("decode", 1.0, 2048.0), ("prefill", 512.0, 512.0)):
        rec = Recorder(1.5)
        op = _first("attn", T=T, S=S, phase=phase, lay=Layout(tp=8))
        _measured_attention(rec, op, Precision().formats()[2], 1e15)
        assert rec.calls[0][3] == (4, 1, 128), phase  # 32 query heads and 8 KV heads over 8 devices


def test_an_implementation_is_shown_by_its_catalog_name_or_path():
    from perfmodel.timemodel import DEFAULT_IMPL, impl_name

    assert impl_name(None) == DEFAULT_IMPL and impl_name("graphs") == "graphs"
    assert impl_name(load_impl("vllm-0.24")) == "vllm-0.24"


@needs_aic
@pytest.mark.parametrize("model", ["llama-3.1-8b", "deepseek-v2-lite"])  # GQA, MLA
@pytest.mark.parametrize("kv, table", [("bf16", "bfloat16"), ("fp8", "fp8")])
@pytest.mark.parametrize("phase", ["decode", "prefill"])
def test_attention_takes_the_measured_kernel_of_its_phase_and_cache_dtype(model, kv, table, phase):
    """decode: the generation table at B = FLOPs / (2 Nq hd keys) sequences; prefill: the context table at
    B = FLOPs / (2 Nq hd pairs) over T new tokens, pairs = T keys - T (T - 1) / 2 (causal); MLA its own tables."""
    hw = load_hardware("h200")  # TensorRT-LLM measures GQA and MLA attention cores (vLLM's MLA: whole modules)
    tm = TimeModel.achievable(hw, load_impl("trtllm-1.3"))
    ks, prec = tm.kernels_table, Precision("bf16", "bf16", kv)
    T, S = (1.0, 2048.0) if phase == "decode" else (512.0, 512.0)
    ops = [op for op in build_ops(load_model(model), 8.0, T, S, phase, prec) if op.attn is not None]
    if phase == "decode":  # a long decode is where the kernel nears its bound (r ~ 1.1 at 64 x 8,192 keys)
        ops += [op for op in build_ops(load_model(model), 64.0, 1.0, 8192.0, phase, prec) if op.attn is not None]
    assert ops
    src = []
    for op, (_, _, t, *_) in zip(ops, tm.price(ops, hw, prec, sources=src)):
        Nq, Nkv, hd, T_ = op.attn
        keys = float(op.keys)
        pairs = T_ * keys - T_ * (T_ - 1.0) / 2.0
        B = op.flops / (2.0 * Nq * hd * pairs)
        assert B == pytest.approx(8.0 if keys != 8192.0 else 64.0)
        kind, L = ("generation", keys) if phase == "decode" else ("context", T_)
        r = ks.mla_ratio(kind, table, Nq, B, L) if Nkv == 0 else ks.attn_ratio(kind, table, (Nq, max(round(Nkv), 1), hd), B, L)
        ideal = max(op.flops / hw.peak("bf16"), op.bytes / hw.memory_bandwidth)
        assert float(t) == pytest.approx(max(float(r), 1.0) * ideal, rel=1e-9), op.name
    assert set(src) == {ks.source}


def test_a_4_bit_cache_has_no_measured_attention_kernel():
    from perfmodel.timemodel import _measured_attention

    op = next(op for op in build_ops(load_model("llama-3.1-8b"), 8.0, 1.0, 2048.0, "decode", Precision())
              if op.attn is not None)
    assert _measured_attention(object(), op, Precision(kv="int4").formats()[2], 1e15) is None


# ---------------------------------------------------------------- what a layout needs from the spec
def test_a_missing_link_or_network_names_the_field_that_is_missing():
    no_link = H100.replace(link_bandwidth=None)
    with pytest.raises(SpecError, match="link_bandwidth") as e:
        link_of(no_link, Layout(tp=2), "tp")
    assert "network_bandwidth" not in str(e.value)
    no_net = H100.replace(network_bandwidth=None)
    with pytest.raises(SpecError, match="network_bandwidth") as e:
        link_of(no_net, Layout(tp=16), "tp")
    assert "devices_per_node=16" in str(e.value)


def test_the_collectives_a_layout_needs_measured_are_listed_when_the_spec_lacks_them():
    a = H100.achievable
    bare = H100.replace(achievable=dataclasses.replace(a, link={}, network={}))
    assert missing_data(bare, Layout(), "achievable") == []
    assert missing_data(bare, Layout(tp=2), "achievable") == ["achievable.link"]
    assert missing_data(bare, Layout(tp=16), "achievable") == ["achievable.link", "achievable.network"]
    assert missing_data(bare, Layout(tp=16), "roofline") == []
    assert missing_data(H100, Layout(tp=16), "achievable") == []


def test_a_time_models_errors_name_the_catalog_entry_it_came_from():
    tm = TimeModel.achievable(H100, load_impl("graphs"))
    assert tm.where == "h100-sxm"
    with pytest.raises(SpecError, match="h100-sxm.*achievable.gemm_efficiency.int8"):
        tm._eff(tm.gemm, "int8", "gemm_efficiency")


def test_the_ideal_time_model_is_an_achievable_model_that_prices_every_collective_as_the_roofline():
    ideal = TimeModel.achievable(H100, load_impl("graphs")).ideal(H100)
    assert isinstance(ideal, TimeModel) and ideal.mode == "achievable" and ideal.kernels_table is None
    for p in (8, 16):  # nvls, one-shot and the rest inside a node; the network beyond it
        o, lay = _coll("allreduce", np.geomspace(8, 2**31, 50), p, "tp"), Layout(tp=p)
        t_i, b_i, _ = ideal.collective(o, H100, lay)
        t_r, b_r, _ = TimeModel.roofline().collective(o, H100, lay)
        np.testing.assert_allclose(t_i, t_r, rtol=1e-12)
        np.testing.assert_allclose(b_i, b_r, rtol=1e-12)


# ---------------------------------------------------------------- the spec blocks, refused field by field
def _ach():
    return copy.deepcopy(load_raw("h100-sxm", "hardware")[0]["achievable"])


def _impl():
    return copy.deepcopy(load_raw("vllm-0.24", "impl")[0])


@pytest.mark.parametrize("field, value", [
    ("gemm_efficiency", {}), ("gemm_efficiency", "0.8"), ("link", {}), ("link", ["ring"]),
    ("gemm_tiles", {"value": [], "source": "s"}), ("gemm_tiles", {"value": [[128]], "source": "s"}),
    ("gemm_tiles", {"value": [[128, 128], [64]], "source": "s"}), ("gemm_tiles", {"value": [128, 128], "source": "s"}),
    ("sm_count", {"value": 0, "source": "s"}),
])
def test_a_bad_achievable_field_is_refused_naming_it(field, value):
    raw = _ach()
    raw[field] = value
    with pytest.raises(SpecError) as e:
        achievable_from_dict(raw, "my.yaml")
    assert f"achievable.{field}" in str(e.value)


def test_the_achievable_blocks_plain_values_parse_to_what_they_say():
    raw = _ach()
    raw["attention_half_keys"] = {"value": 0, "source": "no short-key penalty"}
    raw["sm_count"] = {"value": 1, "source": "one multiprocessor"}
    raw["link"]["ring"]["latency"] = {"value": "3 us", "source": "s"}
    a = achievable_from_dict(raw, "my.yaml")
    assert a.attention_half_keys == 0.0 and a.sm_count == 1
    ring = a.link["ring"]
    assert ring.latency == ((0, 3e-6),) and ring.at(8, lambda q: 2 * (q - 1)) == 3e-6  # one value for every size
    assert {"sm_count", "attention_half_keys", "achievable.link.ring.latency"} <= set(a.sources)


@pytest.mark.parametrize("value", [{"value": [], "source": "s"}, {"value": ["ring", "smoke"], "source": "s"},
                                   {"value": "ring", "source": "s"}])
def test_bad_link_algorithms_are_refused(value):
    with pytest.raises(SpecError, match="link_algorithms"):
        link_algorithms(value, "my.yaml")
    assert link_algorithms({"value": ["ring", "nvls"], "source": "s"}, "my.yaml") == (("ring", "nvls"), "s")


@pytest.mark.parametrize("field, value", [
    ("kernel_tables", "   "), ("kernel_tables", 3), ("kernels", [1]), ("kernels", {"": 1}),
    ("kernels", {"attn_av": 0, 3: 1}), ("kernels", "attn_av"), ("collectives", []), ("collectives", ["ring", "smoke"]),
    ("collectives", ["smoke"]), ("collectives", {"ring": 1}),
])
def test_a_bad_implementation_field_is_refused_naming_it(field, value):
    raw = _impl()
    raw[field] = value if field == "kernel_tables" else {"value": value, "source": "s"}  # a setting; sourced terms
    with pytest.raises(SpecError) as e:
        impl_from_dict(raw, "my.yaml")
    assert field in str(e.value)


def test_an_implementations_description_is_kept_with_its_spacing_folded():
    raw = _impl()
    raw["description"] = "vLLM  with\n CUDA graphs"
    assert impl_from_dict(raw, "my.yaml").description == "vLLM with CUDA graphs"
    raw.pop("description")
    assert impl_from_dict(raw, "my.yaml").description == ""



# ---------------------------------------------------------------- survivors of counting.py and units.py
def test_a_chunk_of_one_key_from_scratch_reads_every_key_of_the_prompt():
    from perfmodel.counting import chunk_read_len

    assert chunk_read_len(4.0, 4.0, 1.0) == 4.0  # S - T = 0: no earlier chunk to skip
    assert chunk_read_len(1.0, 9.0, 4.0) == 1.0  # one query at position 9 under chunks of 4: ((9 - 1) mod 4) + 1


def test_when_every_token_routes_to_every_expert_all_of_them_are_touched_at_any_batch():
    from perfmodel.counting import _touched

    np.testing.assert_array_equal(_touched(8, 8, np.array([1.0, 5.0, 300.0])), [8.0, 8.0, 8.0])
    assert _touched(8, 2, 1.0) == pytest.approx(2.0)  # one token: its own top-k


def test_peta_and_an_hourly_price_parse_exactly():
    from perfmodel.units import parse_quantity

    assert parse_quantity("1 PB", "bytes") == 1e15 and parse_quantity("2 PFLOP/s", "flop/s") == 2e15
    assert parse_quantity("2 /h", "USD/h") == 2.0 and parse_quantity("2.5 USD/hr", "USD/h") == 2.5


@needs_aic
@pytest.mark.parametrize("phase", ["decode", "prefill"])
def test_the_measured_time_is_the_device_time_of_the_ops_a_table_priced(phase):
    """measured_share's numerator: the device time (max of compute and memory, x count) of every op a measured table
    priced, nothing of the others; in a compute-bound prefill that is the compute time, not the memory time."""
    from perfmodel import engine

    hw = load_hardware("h100-sxm")
    tm = TimeModel.achievable(hw, load_impl("vllm-0.24"))
    prec = Precision()
    T, S = (1.0, 2048.0) if phase == "decode" else (2048.0, 2048.0)
    ops = build_ops(load_model("llama-3.1-8b"), 8.0, T, S, phase, prec)
    src = []
    priced = tm.price(ops, hw, prec, sources=src)
    want = sum(p[2] * op.count for op, p, s in zip(ops, priced, src) if s != "datasheet")
    got = engine.roofline(ops, hw, prec, None, None, True, tm)
    assert 0 < want < float(got["device_time"])
    assert float(got["measured_time"]) == pytest.approx(want, rel=1e-12)
    if phase == "prefill":  # compute-bound GEMMs: the memory time alone would be far less
        assert want > 1.5 * sum(p[1] * op.count for op, p, s in zip(ops, priced, src) if s != "datasheet")
