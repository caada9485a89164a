"""Cost per million tokens and energy per token follow from the computed throughput."""
import pytest

import perfmodel as pm
from perfmodel import api
from perfmodel.cli import main


def test_cost_per_million_tokens_is_price_over_throughput():
    r = api.decode("llama-2-13b", "h100-sxm", batch=[1, 64], price="2.49/h")
    for thr, cost in zip(r["throughput_tok_s"], r["cost_per_million_tokens"]):
        assert cost == pytest.approx(2.49 / 3600 / thr * 1e6)
    assert r["cost_per_million_tokens"][1] < r["cost_per_million_tokens"][0]  # batching makes tokens cheaper


def test_energy_is_an_upper_bound_at_tdp_unless_a_measured_power_is_given():
    r = api.decode("llama-2-13b", "h100-sxm", batch=[1], energy=True)
    assert r["energy_per_token_j"][0] == pytest.approx(700 / r["throughput_tok_s"][0])
    hw = pm.load_hardware("h100-sxm").replace(power=450.0)
    r2 = api.decode("llama-2-13b", hw, batch=[1], energy=True)
    assert r2["energy_per_token_j"][0] == pytest.approx(450 / r2["throughput_tok_s"][0])


def test_cost_counts_every_device_of_a_layout():
    hw = pm.load_hardware("h100-sxm").replace(link_bandwidth=450e9, link_latency=2e-6, devices_per_node=8)
    r = api.decode("llama-2-13b", hw, batch=[8], tp=4, price=2.0)
    assert r["cost_per_million_tokens"][0] == pytest.approx(4 * 2.0 / 3600 / r["throughput_tok_s"][0] * 1e6)


def test_a_price_in_the_spec_is_used_and_the_cli_takes_dollars_per_hour(capsys, tmp_path):
    p = tmp_path / "gpu.yaml"
    p.write_text("base: h100-sxm\nprice_per_hour: {value: 3.0, source: my assumption}\n")
    r = api.decode("llama-2-13b", str(p), batch=[1])
    assert r["cost_per_million_tokens"][0] == pytest.approx(3.0 / 3600 / r["throughput_tok_s"][0] * 1e6)
    assert main(["decode", "--batch", "1", "--price", "$2.49/h", "--format", "json"]) == 0
    assert "cost_per_million_tokens" in capsys.readouterr().out
    assert main(["decode", "--price", "cheap"]) == 2
    assert "--price" in capsys.readouterr().err


def test_serve_sim_reports_cost_and_energy_at_the_simulated_throughput():
    from perfmodel import serving

    (r,) = serving.serve_runs(policy="continuous", requests=8, slots=4, price="2.49/h", energy=True)
    s = r.summary
    assert s["cost_per_million_tokens"] == pytest.approx(2.49 / 3600 / s["throughput_tok_s"] * 1e6)
    assert s["energy_per_token_j"] == pytest.approx(700 / s["throughput_tok_s"])


def test_intensity_lists_the_collectives_of_a_layout():
    hw = pm.load_hardware("h100-sxm")
    t = api.intensity("llama-2-13b", hw, batch=8, context=1024, tp=4, phases=("decode",))
    rows = dict(zip(t["op"], t["bound"]))
    assert rows["allreduce_mlp"] == "link" and rows["allreduce_attn"] == "link"
    # bytes each device sends with the algorithm the roofline chose: one-shot reads its 3 peers' buffers
    assert dict(zip(t["op"], t["bytes"]))["allreduce_mlp"] == pytest.approx(40 * 3 * 8 * 5120 * 2)
