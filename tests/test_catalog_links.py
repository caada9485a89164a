"""Catalog law: every device's scale-up link prices tensor parallelism inside one node.

For every hardware spec in the catalog and every power-of-two tp from 2 up to its devices_per_node
(and no larger than llama-3.1-8b's query heads, which tp must divide), one decode step of
llama-3.1-8b at batch 8 and 1024 tokens of context runs in the roofline mode and gives a finite,
positive latency; the same in the achievable mode where the spec has an achievable block. A device
added to the catalog is covered without touching this file.

The device's own peak decides the activation format: bf16 where the spec has a bf16 peak, else fp16
(the T4 has none; asking it for bf16 is a SpecError by design).

A single-device spec (devices_per_node 1: the GeForce cards, GH200) has no tp group inside one node,
so it contributes no tp > 1 case here; a tp group beyond the node needs network_bandwidth, a
separate matter. Every spec with more than one device per node carries a positive link_bandwidth and
link_latency: the roofline's collective cost has both a bandwidth and a latency term.
"""
import math
import warnings

import pytest

import perfmodel as pm
from perfmodel.errors import DataWarning

MODEL = "llama-3.1-8b"
HW_NAMES = pm.catalog_names("hardware")
HARDWARE = {n: pm.load_hardware(n) for n in HW_NAMES}
HEADS = pm.load_model(MODEL).n_heads


def _tps(hw) -> list[int]:
    """Powers of two from 2 up to devices_per_node, each dividing the model's query heads."""
    dpn = int(hw.devices_per_node or 1)
    out, tp = [], 2
    while tp <= dpn and tp <= HEADS:
        if HEADS % tp == 0:
            out.append(tp)
        tp *= 2
    return out


def _act(hw) -> str:
    return "bf16" if "bf16" in hw.peak_flops else "fp16"


CASES = [pytest.param(n, tp, "roofline", id=f"{n}-tp{tp}-roofline") for n in HW_NAMES for tp in _tps(HARDWARE[n])]
CASES += [pytest.param(n, tp, "achievable", id=f"{n}-tp{tp}-achievable")
          for n in HW_NAMES if HARDWARE[n].achievable is not None for tp in _tps(HARDWARE[n])]


def test_cases_cover_the_multi_device_catalog():
    """The law is not vacuous: every spec with devices_per_node > 1 has at least its tp=2 case."""
    multi = [n for n in HW_NAMES if (HARDWARE[n].devices_per_node or 1) > 1]
    assert multi, "no catalog device has more than one device per node"
    covered = {p.values[0] for p in CASES}
    assert set(multi) <= covered


@pytest.mark.parametrize("name,tp,mode", CASES)
def test_tp_decode_inside_one_node_is_finite(name, tp, mode):
    hw = HARDWARE[name]
    dt = _act(hw)
    with warnings.catch_warnings():
        # a spec that lacks measured collectives (achievable.link) still prices the step, optimistically
        warnings.simplefilter("ignore", DataWarning)
        df = pm.decode(MODEL, name, batch=8, context=1024, tp=tp, mode=mode, weights_dtype=dt, act_dtype=dt)
    assert len(df) == 1
    lat = float(df.latency_s.iloc[0])
    assert math.isfinite(lat) and lat > 0, f"{name} tp={tp} {mode}: latency {lat}"
    assert int(df.tp.iloc[0]) == tp
    comm = float(df.comm_time_s.iloc[0])
    assert math.isfinite(comm) and comm > 0, f"{name} tp={tp} {mode}: comm_time_s {comm} (a tp group communicates)"
    assert comm < lat


@pytest.mark.parametrize("name", [n for n in HW_NAMES if (HARDWARE[n].devices_per_node or 1) > 1])
def test_multi_device_specs_have_a_link(name):
    hw = HARDWARE[name]
    assert hw.link_bandwidth and hw.link_bandwidth > 0, f"{name}: devices_per_node {hw.devices_per_node} without link_bandwidth"
    assert hw.link_latency and hw.link_latency > 0, f"{name}: devices_per_node {hw.devices_per_node} without link_latency"
    assert math.isfinite(hw.link_bandwidth) and math.isfinite(hw.link_latency)


# Specs outside this law's reach today, each with the reason; strict, so a fix shows up as an XPASS to remove.
WITHOUT_LINK = {
    "gh200": "hardware/gh200.yaml models one GPU per Grace Hopper superchip and gives no link_* (NVL2/NVL32 not modelled)",
}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(reason=WITHOUT_LINK[n], strict=True))
                                  if n in WITHOUT_LINK else n for n in HW_NAMES])
def test_every_spec_states_its_node_and_link(name):
    """devices_per_node is stated (a spec without it cannot say whether a tp group stays in one node: issue 25's
    `--tp 2` on mi355x and gaudi3), and so is the link, even for a single-device card (its PCIe link)."""
    hw = HARDWARE[name]
    assert hw.devices_per_node and hw.devices_per_node >= 1, f"{name}: devices_per_node missing"
    assert hw.link_bandwidth and hw.link_bandwidth > 0, f"{name}: link_bandwidth missing"
    assert hw.link_latency and hw.link_latency > 0, f"{name}: link_latency missing"
