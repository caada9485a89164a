"""The Python API: DataFrames with SI columns, specs editable in code, the op list exposed."""
import numpy as np
import pytest

import perfmodel as pm
from perfmodel import engine


def test_decode_returns_one_row_per_batch_and_context():
    df = pm.decode("llama-2-13b", "h100-sxm", batch=[1, 64], context=[1024, 4096])
    assert len(df) == 4 and list(df.batch) == [1, 1, 64, 64] and list(df.context) == [1024, 4096, 1024, 4096]
    assert df.latency_s.dtype == float and df.fits.dtype == bool


def test_specs_can_be_modified_in_code_and_are_validated():
    m = pm.load_model("llama-2-13b").replace(n_kv_heads=8)
    assert pm.kv(m, context=1024).kv_cache_bytes[0] == 838_860_800 / 5
    with pytest.raises(pm.SpecError, match="n_kv_heads"):
        pm.load_model("llama-2-13b").replace(n_kv_heads=7)
    fast = pm.load_hardware("h100-sxm").replace(memory_bandwidth=6.7e12)
    a = pm.decode("llama-2-13b", "h100-sxm", batch=1, mode="simple").latency_s[0]
    b = pm.decode("llama-2-13b", fast, batch=1, mode="simple").latency_s[0]
    assert a == pytest.approx(2 * b)


def test_every_op_reports_flops_bytes_and_intensity():
    for op in pm.build_ops(pm.load_model("mixtral-8x7b"), 8, 1, 2048, "decode"):
        assert np.all(np.asarray(op.bytes) > 0), op
        assert op.bytes == pytest.approx(op.bytes_read + op.bytes_written)


def test_a_mixed_step_of_equal_decodes_is_one_decode_step():
    m, hw = pm.load_model("llama-2-13b"), pm.load_hardware("h100-sxm")
    mixed = engine.mixed_step(m, hw, np.ones(16), np.full(16, 1024.0))["latency_s"]
    plain = engine.evaluate(m, hw, 16, 1024)["latency_s"][0, 0]
    assert mixed == pytest.approx(plain, rel=1e-12)


def test_a_mixed_step_counts_attention_at_each_sequences_own_context():
    m, hw = pm.load_model("llama-2-13b"), pm.load_hardware("h100-sxm")
    a = engine.mixed_step(m, hw, [1, 1], [100.0, 3900.0])
    b = engine.mixed_step(m, hw, [1, 1], [2000.0, 2000.0])
    assert a["bytes"] == pytest.approx(b["bytes"])  # KV read is linear in the contexts' sum
    c = engine.mixed_step(m, hw, [1, 512], [2000.0, 512.0])  # a decode plus a prompt chunk
    assert c["tokens"] == 513 and c["latency_s"] > b["latency_s"]
