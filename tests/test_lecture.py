"""The lecture's worked example (BRIEF, "Latency, throughput, TTFT"): Llama 2 13B, bf16, H100 SXM, S = 1024."""
import numpy as np
import pytest

import perfmodel as pm
from perfmodel import api, engine
from perfmodel.ops import param_count


@pytest.fixture(scope="module")
def llama():
    return pm.load_model("llama-2-13b")


@pytest.fixture(scope="module")
def h100():
    return pm.load_hardware("h100-sxm")


def test_params_are_13_billion(llama):
    assert param_count(llama) == pytest.approx(13.0e9, rel=0.01)


def test_kv_cache_of_one_sequence_at_1024_is_838860800_bytes(llama):
    # 2 (K and V) * S * K * H * L * 2 bytes = 2 * 1024 * 40 * 128 * 40 * 2
    assert engine.per_sequence(llama, 1024.0)["kv_bytes_per_seq"] == 838_860_800
    assert engine.kv_growth_per_token(llama) == 819_200


def test_simple_mode_batch_1_step_is_8_02_ms_and_124_7_tokens_per_s(llama, h100):
    r = api.decode(llama, h100, batch=1, context=1024, mode="simple")
    assert round(float(r["latency_s"][0]), 5) == 0.00802
    assert round(float(r["throughput_tok_s"][0]), 1) == 124.7


def test_batch_256_does_not_fit_in_80_GB(llama, h100):
    r = api.decode(llama, h100, batch=256, context=1024, mode="simple")
    assert not r["fits"][0]
    assert r["memory_bytes"][0] > 80e9


def test_gqa8_improves_latency_and_throughput_and_fits_at_256(llama, h100):
    base = api.decode(llama, h100, batch=[1, 64], context=1024)
    gqa = api.decode("llama-2-13b-gqa8", h100, batch=[1, 64, 256], context=1024)
    assert np.all(gqa["latency_s"][:2] < base["latency_s"])
    assert np.all(gqa["throughput_tok_s"][:2] > base["throughput_tok_s"])
    assert gqa["fits"][2]


def test_ridge_of_h100_is_about_295(h100):
    assert h100.ridge("bf16") == pytest.approx(295, abs=1)


def test_roofline_agrees_with_simple_within_a_few_percent_at_batch_1(llama, h100):
    s = api.decode(llama, h100, 1, 1024, mode="simple")["latency_s"][0]
    r = api.decode(llama, h100, 1, 1024, mode="roofline")["latency_s"][0]
    assert abs(r / s - 1) < 0.03


def test_at_large_batch_the_mlp_turns_compute_bound_and_batching_stops_paying(h100):
    g = pm.load_model("llama-2-13b-gqa8")
    t = api.intensity(g, h100, batch=512, context=1024, phases=("decode",))
    bound = dict(zip(t["op"], t["bound"]))
    assert bound["mlp_up_gate"] == "compute" and bound["mlp_down"] == "compute"
    small = api.intensity(g, h100, batch=64, context=1024, phases=("decode",))
    assert dict(zip(small["op"], small["bound"]))["mlp_up_gate"] == "memory"
    # the MLP's share of the step stops shrinking once it is compute-bound: its time per token flattens
    B = np.array([256.0, 512.0, 1024.0, 2048.0])
    ops = pm.build_ops(pm.load_model("llama-2-13b-gqa8").replace(n_layers=1), B, 1.0, 1.0, "decode")
    times = [t for op, (_, _, t) in zip(ops, engine.op_times(ops, h100, pm.Precision())) if op.name == "mlp_up_gate"][0]
    per_token = times / B
    assert per_token[-1] == pytest.approx(per_token[-2], rel=1e-9)  # compute-bound: linear in B
    assert per_token[0] > per_token[1]  # memory-bound: weight reads still amortise


def test_ttft_grows_with_the_prompt(llama, h100):
    t = api.prefill(llama, h100, 1, [128, 512, 2048])["latency_s"]
    assert np.all(np.diff(t) > 0)
