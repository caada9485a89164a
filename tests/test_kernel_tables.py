"""Measured kernel tables (docs/derivations.md, "Measured kernels"): Gated DeltaNet layers (Qwen3.5) priced from
AIConfigurator's linear-attention kernels, the causal conv1d (causal_conv1d_fn in a prompt, causal_conv1d_update in
decode) and the gated delta rule (the chunked kernel in a prompt, the recurrent one in decode); and a measured run
priced by the tables of exactly the engine version it used, where AIConfigurator measured that version."""
import numpy as np
import pandas as pd
import pytest

import perfmodel as pm
from perfmodel import engine, kernels
from perfmodel.interp import _grid
from perfmodel.kernel_set import KernelSet
from perfmodel.ops import Layout, Precision, build_ops
from perfmodel.timemodel import _measured_gdn

AIC = kernels.aic_dir() is not None and (kernels.aic_dir() / "b200_sxm").is_dir()
needs_aic = pytest.mark.skipif(not AIC, reason="the kernels extra (aiconfigurator-core) is not installed")
QWEN = "qwen3.5-397b-a17b"  # 45 Gated DeltaNet layers; 16 k and 64 v heads of 128: 4 and 16 a device at tp 4


def _gdn(t, phase):
    rows = t[(t.phase == phase) & t.op.str.startswith("gdn_")]
    return {op.split("[")[0]: (float(s), src) for op, s, src in zip(rows.op, rows.time_s, rows.priced_by)}


@needs_aic
def test_at_a_measured_shape_each_gdn_kernel_costs_what_aiconfigurator_timed_on_each_of_45_layers():
    """SGLang 0.5.14 on B200, 4 k and 16 v heads a device (gdn_perf.parquet, the fastest row of a shape): a prompt of
    8,192 tokens, chunk_gated_delta_rule 0.4328365 ms and causal_conv1d_fn 0.038048 ms; a decode step of 16
    sequences, the packed recurrent kernel 0.007224 ms and causal_conv1d_update 0.00229984 ms."""
    kw = dict(weights_dtype="fp8-b128", act_dtype="fp8", kv_dtype="fp8", tp=4, mode="achievable", impl="sglang-0.5")
    pre = _gdn(pm.intensity(QWEN, "b200", 1, 8192, **kw), "prefill")
    dec = _gdn(pm.intensity(QWEN, "b200", 16, 1536, **kw), "decode")
    assert pre["gdn_core"][0] == pytest.approx(45 * 0.4328365e-3, rel=1e-5)  # float32 in the table
    assert pre["gdn_conv"][0] == pytest.approx(45 * 0.038048e-3, rel=1e-5)  # float32 in the table
    assert dec["gdn_core"][0] == pytest.approx(45 * 0.007224e-3, rel=1e-5)  # float32 in the table
    assert dec["gdn_conv"][0] == pytest.approx(45 * 0.00229984e-3, rel=1e-5)  # float32 in the table
    src = "AIConfigurator " + kernels._aic_version() + " b200_sxm sglang 0.5.14"
    assert all(pre[k][1] == src and dec[k][1] == src for k in ("gdn_core", "gdn_conv"))
    ks = kernels.load(pm.load_hardware("b200"), "sglang", "0.5.14")
    assert ks.versions["gdn"] == "0.5.14" and "gdn 0.5.14" in ks.kinds()  # the footer names the table read
    assert pre["gdn_norm_gate"][1] == "datasheet"  # the gated RMSNorm is not in the tables
    # the roofline never reads a table
    roof = _gdn(pm.intensity(QWEN, "b200", 1, 8192, weights_dtype="fp8-b128", act_dtype="fp8", kv_dtype="fp8", tp=4),
                "prefill")
    assert roof["gdn_core"][0] < pre["gdn_core"][0] and roof["gdn_core"][1] == "roofline"


def _set(tables):
    ks = KernelSet(source="test")
    for (phase, part, heads), rows in tables.items():
        axes = ["batch_size"] if phase == "generation" else ["batch_size", "seq_len"]
        df = pd.DataFrame(rows, columns=axes + ["latency"])
        ks.gdn.setdefault((phase, part), {})[heads] = _grid(df, axes, np.log(df["latency"].to_numpy()))
    return ks


def test_a_head_shape_not_measured_takes_the_nearest_scaled_by_its_state_or_conv_channels():
    """The delta rule's work is its state, Hv dk dv a sequence; the conv's its q, k, v channels, 2 Hk dk + Hv dv."""
    ks = _set({("generation", "core", (4, 16)): [(1, 2e-6), (16, 8e-6)],
               ("generation", "conv", (4, 16)): [(1, 1e-6), (16, 4e-6)]})
    assert ks.gdn_time("generation", "core", (4, 16, 128, 128), 16, 1) == pytest.approx(8e-6)
    assert ks.gdn_time("generation", "core", (4, 32, 128, 128), 16, 1) == pytest.approx(16e-6)  # nearest (4, 16)
    assert ks.gdn_time("generation", "core", (4, 16, 128, 64), 16, 1) == pytest.approx(4e-6)
    assert ks.gdn_time("generation", "conv", (4, 32, 128, 128), 16, 1) == pytest.approx(4e-6 * (8 + 32) / (8 + 16))
    # log-log between the measured batches, held at the edges
    assert ks.gdn_time("generation", "core", (4, 16, 128, 128), 4, 1) == pytest.approx(4e-6)
    assert ks.gdn_time("generation", "core", (4, 16, 128, 128), 64, 1) == pytest.approx(8e-6)
    assert ks.gdn_time("context", "core", (4, 16, 128, 128), 1, 512) is None  # no prompt kernel measured


def test_a_step_of_several_sequences_is_one_kernel_over_all_of_them_counted_back_from_the_ops_bytes():
    """The serving simulators sum a step's rows into one op: its sequences are its state bytes over one sequence's,
    its tokens its output bytes over one token's, so three decode rows look up batch 3, and two prompt chunks of
    100 and 300 tokens batch 2 of 200 tokens each."""
    m = pm.load_model(QWEN)
    ks = _set({("generation", "core", (4, 16)): [(1, 1e-6), (2, 2e-6), (4, 4e-6)],
               ("context", "core", (4, 16)): [(1, 100, 1e-4), (1, 400, 4e-4), (4, 100, 4e-4), (4, 400, 16e-4)]})

    def core(B, T, S, phase):
        return next(o for o in build_ops(m, B, T, S, phase, Precision("bf16"), layout=Layout(tp=4))
                    if o.name == "gdn_core")

    one = core(1.0, 1.0, 500.0, "decode")
    three = core(1.0, 1.0, 500.0, "decode")
    for f in ("kv_read", "act_write", "flops", "act_read", "kv_write"):
        setattr(three, f, 3 * getattr(one, f))
    peak, bw = 1e15, 8e12
    r, _ = _measured_gdn(ks, three, peak, bw)
    ideal = max(three.flops / peak, three.bytes / bw)
    assert float(r) * ideal == pytest.approx(3e-6)
    a, b = core(1.0, 100.0, 100.0, "prefill"), core(1.0, 300.0, 300.0, "prefill")
    for f in ("kv_read", "act_write", "flops", "act_read", "kv_write"):
        setattr(a, f, getattr(a, f) + getattr(b, f))
    r, _ = _measured_gdn(ks, a, peak, bw)
    assert float(r) * max(a.flops / peak, a.bytes / bw) == pytest.approx(4e-4, rel=1e-9)  # t = 1e-6 B T: 2 x 200


@needs_aic
def test_a_serving_step_of_a_gdn_model_prices_its_measured_kernels_alike_in_every_simulator():
    """StepCost and fastsim's FastCost give a Qwen3.5 step the time engine.mixed_step does, decode rows and prompt
    chunks mixed (the GDN kernels looked up at each step's own sequences and tokens)."""
    from perfmodel.serving import StepCost, fastsim

    m, h, p, lay = pm.load_model(QWEN), pm.load_hardware("b200"), Precision("fp8-b128", "fp8", "fp8"), Layout(tp=4)
    ref = StepCost(m, h, p, 1, lay, "achievable", "sglang-0.5")
    fast = fastsim.FastCost(StepCost(m, h, p, 1, lay, "achievable", "sglang-0.5"), 8192)
    for nd, chunks in [(5, []), (0, [2000]), (7, [512]), (30, [1500, 300])]:
        T = np.concatenate([np.ones(nd, dtype=np.int64), np.asarray(chunks, dtype=np.int64)])
        S = np.concatenate([np.full(nd, 3000), np.asarray(chunks, dtype=np.int64) + 100])
        want = engine.mixed_step(m, h, T, S, p, layout=lay, mode="achievable", impl="sglang-0.5")["latency_s"]
        assert ref(list(zip(T.tolist(), S.tolist()))) == pytest.approx(want, rel=1e-9), (nd, chunks)
        assert fast(T, S) == pytest.approx(want, rel=1e-9), (nd, chunks)


# ---------------------------------------------------------------- the kernels of the engine version that ran
def _two_versions(root):
    """A B200 vLLM MoE table at 0.19.0 taking twice 0.24.0's time, shape for shape."""
    shape = (3072, 1536, 8, 256, 4, 1)
    for version, t in (("0.19.0", 0.04), ("0.24.0", 0.02)):
        d = root / "b200_sxm" / "moe" / "vllm" / version
        d.mkdir(parents=True)
        rows = [("k", "fp8_block", n, *shape, kernels.MOE_DISTRIBUTION, t * n ** 0.5) for n in (1, 16, 256)]
        pd.DataFrame(rows, columns=["kernel_source", "moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk",
                                    "num_experts", "moe_tp_size", "moe_ep_size", "distribution", "latency"]
                     ).to_parquet(d / "moe_perf.parquet")
    return shape


def test_a_run_is_priced_by_the_tables_of_its_own_engine_version_where_that_version_was_measured(tmp_path,
                                                                                                 monkeypatch):
    """A measured version prices the runs made with it; one AIConfigurator never measured leaves the profile's
    version (its pick_version), not the nearest other one."""
    pytest.importorskip("pyarrow")
    shape = _two_versions(tmp_path)
    monkeypatch.setenv("PERFMODEL_AIC_DATA", str(tmp_path))
    hw = pm.load_hardware("b200")
    new = kernels._load_aic(hw, "b200_sxm", "vllm", "0.24.0")
    own = kernels._load_aic(hw, "b200_sxm", "vllm", "0.24.0", exact="0.19.0")
    other = kernels._load_aic(hw, "b200_sxm", "vllm", "0.24.0", exact="0.18.0")
    assert own.versions["moe"] == "0.19.0" and new.versions["moe"] == other.versions["moe"] == "0.24.0"
    r = [float(ks.moe_ratio("fp8_block", shape, 16.0)) for ks in (own, new, other)]
    assert r[0] == pytest.approx(2 * r[1]) and r[2] == r[1]
    assert own.source.endswith("vllm 0.24.0 (0.19.0 where measured)")
    assert kernels.measured_version("b200_sxm", "vllm", "0.19.0") == "0.19.0"
    assert kernels.measured_version("b200_sxm", "vllm", "0.18.0") == ""
    assert kernels.measured_version("b200_sxm", "sglang", "0.19.0") == ""  # another engine's folder
    assert kernels.measured_version("b200_sxm", "vllm", float("nan")) == ""  # a row with no version
    monkeypatch.setattr(kernels, "aic_dir", lambda: None)  # without the extra: no version was measured
    assert kernels.measured_version("b200_sxm", "vllm", "0.19.0") == ""


def test_the_serving_validation_names_the_version_that_ran_only_for_the_engines_own_profile(monkeypatch, tmp_path):
    """Predictor.impl_for: the engine's profile with the row's version as exact_version (its own key, so that its
    instances are its own); a profile the user named is priced as named."""
    from perfmodel.serving.silicon import Predictor

    monkeypatch.setenv("PERFMODEL_AIC_DATA", str(tmp_path))
    eng = Predictor("achievable")
    a, b = eng.impl_for("vllm", "", "0.19.0"), eng.impl_for("vllm")
    assert a.exact_version == "0.19.0" and b.exact_version == "" and a.key != b.key
    assert eng.impl_for("vllm", "", "0.19.0") is a
    assert Predictor("achievable", impl="vllm-0.24").impl_for("vllm", "", "0.19.0").exact_version == ""
    assert Predictor("roofline").impl_for("vllm", "", "0.19.0") is None
    moe = eng.impl_for("trtllm", "CUTLASS", "1.3.0rc20")
    assert moe.moe_backend == "CUTLASS" and moe.exact_version == "1.3.0rc20"


@needs_aic
def test_the_vllm_0_19_profile_prices_with_vllm_0_19_s_tables_where_measured_and_the_step_loop_of_0_24():
    """vllm-0.19 is vllm-0.24 (its step loop) at engine version 0.19.0: B200's fused MoE from the 0.19.0 table,
    AIConfigurator's GEMMs of 0.24.0 (no older ones); its MoE kernels are slower, so the step is."""
    kw = dict(batch=[32], context=1536, tp=4, weights_dtype="fp8-b128", act_dtype="fp8", kv_dtype="fp8",
              mode="achievable")
    old = pm.decode("minimax-m2.5", "b200", impl="vllm-0.19", **kw).latency_s.iloc[0]
    new = pm.decode("minimax-m2.5", "b200", impl="vllm-0.24", **kw).latency_s.iloc[0]
    assert 1.05 * new < old < 1.5 * new
    from perfmodel.specs import load_impl

    a, b = load_impl("vllm-0.19"), load_impl("vllm-0.24")
    assert (a.engine, a.engine_version) == ("vllm", "0.19.0") and (a.host_step, a.host_per_seq) == (b.host_step,
                                                                                                     b.host_per_seq)
    ks = kernels.load(pm.load_hardware("b200"), a.engine, a.engine_version)
    assert ks.versions["moe"] == "0.19.0" and ks.versions["gemm"] == "0.24.0"


def test_only_the_head_dims_the_gdn_rules_are_scaled_from_are_read(tmp_path, monkeypatch):
    """gdn_time scales a measured time by channels of 128-wide heads: a row of another head dim (k 128, v 64 here, at
    a thousandth of the time, which the fastest-kernel rule would take) is not read, whichever of its dims differs."""
    pytest.importorskip("pyarrow")
    d = tmp_path / "b200_sxm" / "linear_attention" / "sglang" / "0.5.14"
    d.mkdir(parents=True)
    cols = ["kernel_source", "phase", "batch_size", "seq_len", "num_k_heads", "num_v_heads", "head_k_dim",
            "head_v_dim", "latency"]
    rows = [("fused_recurrent_gated_delta_rule", "generation", b, 1, 4, 16, 128, 128, 0.001 * b) for b in (1, 16)]
    rows += [("fused_recurrent_gated_delta_rule", "generation", b, 1, 4, 16, hk, hv, 1e-6 * b)
             for b in (1, 16) for hk, hv in ((128, 64), (64, 128))]
    pd.DataFrame(rows, columns=cols).to_parquet(d / "gdn_perf.parquet")
    monkeypatch.setenv("PERFMODEL_AIC_DATA", str(tmp_path))
    ks = kernels._load_aic(pm.load_hardware("b200"), "b200_sxm", "sglang", "0.5.14")
    assert ks.versions["gdn"] == "0.5.14" and set(ks.gdn) == {("generation", "core")}
    assert float(ks.gdn_time("generation", "core", (4, 16, 128, 128), 16, 1)) == pytest.approx(16e-6)


def test_a_gdn_kernel_timed_faster_than_its_ideal_is_priced_at_the_roofline_never_below(tmp_path, monkeypatch):
    """max(r, 1) keeps the roofline a bound: tables that time each GDN kernel at a picosecond price each op at its
    roofline time, computed at the roofline's own peak (the attention rate for the delta rule, a prompt's being
    compute-bound at the CUDA-core rate and memory-bound at the tensor rate), and a prompt of one-token chunks looks
    up the one-token row."""
    pytest.importorskip("pyarrow")
    d = tmp_path / "b200_sxm" / "linear_attention" / "sglang" / "0.5.14"
    d.mkdir(parents=True)
    cols = ["kernel_source", "phase", "batch_size", "seq_len", "num_k_heads", "num_v_heads", "head_k_dim",
            "head_v_dim", "latency"]
    rows = [(src, ph, b, t, 4, 16, 128, 128, 1e-9) for src, ph in (("chunk_gated_delta_rule", "context"),
                                                                   ("causal_conv1d_fn", "context"),
                                                                   ("fused_recurrent_gated_delta_rule", "generation"),
                                                                   ("causal_conv1d_update", "generation"))
            for b in (1, 16) for t in ((1, 8192) if ph == "context" else (1,))]
    pd.DataFrame(rows, columns=cols).to_parquet(d / "gdn_perf.parquet")
    monkeypatch.setenv("PERFMODEL_AIC_DATA", str(tmp_path))
    monkeypatch.setenv("PERFMODEL_CACHE", str(tmp_path / "cache"))
    kw = dict(weights_dtype="fp8-b128", act_dtype="fp8", kv_dtype="fp8", tp=4)
    ach = pm.intensity(QWEN, "b200", 1, 8192, mode="achievable", impl="sglang-0.5", **kw)
    roof = pm.intensity(QWEN, "b200", 1, 8192, **kw)
    for name in ("gdn_core", "gdn_conv"):
        for phase in ("prefill", "decode"):
            a = ach[(ach.phase == phase) & ach.op.str.startswith(name)]
            r = roof[(roof.phase == phase) & roof.op.str.startswith(name)]
            assert a.priced_by.iloc[0].startswith("AIConfigurator")
            assert float(a.time_s.iloc[0]) == pytest.approx(float(r.time_s.iloc[0]), rel=1e-9), (name, phase)
    # one-token chunks: the seq_len 1 row (here a million times the 8,192-token row's time), not a neighbour's
    ks = kernels._load_aic(pm.load_hardware("b200"), "b200_sxm", "sglang", "0.5.14")
    ks.gdn[("context", "core")][(4, 16)] = _grid(
        pd.DataFrame([(1, 1, 1e-3), (1, 8192, 1e-9)], columns=["batch_size", "seq_len", "latency"]),
        ["batch_size", "seq_len"], np.log([1e-3, 1e-9]))
    op = next(o for o in build_ops(pm.load_model(QWEN), 1.0, 1.0, 1.0, "prefill", Precision("bf16"),
                                   layout=Layout(tp=4)) if o.name == "gdn_core")
    r, peak = _measured_gdn(ks, op, 1e15, 8e12)
    assert float(r) * max(op.flops / peak, op.bytes / 8e12) == pytest.approx(1e-3)
