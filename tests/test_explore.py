"""perfmodel.explore(): the controls, driven headless, change the figures, the decode row and the
per-op table the way the same queries say they should."""
import pytest

pytest.importorskip("ipywidgets")
matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import perfmodel as pm  # noqa: E402


@pytest.fixture(scope="module")
def ex():
    return pm.explore("llama-3.1-8b", "h100-sxm", batch=16, context=1024)


def _same(ex, **kw):
    s = ex.settings
    d = pm.decode(s["model"], s["hardware"], batch=[s["batch"]], context=s["context"], mode=s["mode"],
                  weights_dtype=s["weights_dtype"], kv_dtype=s["kv_dtype"], tp=s["tp"])
    assert ex.decode.latency_s[0] == pytest.approx(float(d.latency_s[0]), rel=1e-12)
    assert ex.decode.memory_bytes[0] == pytest.approx(float(d.memory_bytes[0]), rel=1e-12)
    return d


def test_the_explorer_has_every_control_and_shows_the_decode_step(ex):
    assert set(ex.controls) == {"model", "hardware", "batch", "context", "weights_dtype", "kv_dtype", "mode", "tp"}
    assert ex.error is None and ex.latency_image.value[:4] == b"\x89PNG" and ex.memory_image.value[:4] == b"\x89PNG"
    _same(ex)
    assert "llama-3.1-8b on h100-sxm, B=16" in ex.status.value and "mode roofline" in ex.status.value
    assert "mlp_up_gate" in ex.table.value and set(ex.ops.columns) >= {"op", "flops", "bytes", "time_s"}


def test_moving_the_batch_redraws_and_recomputes(ex):
    before = (ex.latency_image.value, ex.memory_image.value, ex.table.value, float(ex.decode.latency_s[0]))
    n = ex.updates
    ex.controls["batch"].value = 256
    assert ex.updates == n + 1
    _same(ex)
    assert float(ex.decode.latency_s[0]) > before[3]  # a bigger batch takes longer per step
    assert ex.latency_image.value != before[0] and ex.memory_image.value != before[1] and ex.table.value != before[2]
    ops = ex.ops.set_index("op")
    assert ops.loc["mlp_up_gate", "intensity"] > 200  # decode matmul intensity is about B


def test_an_fp8_kv_cache_halves_the_kv_bytes(ex):
    ex.set(kv_dtype="bf16", batch=64)
    kv16 = float(ex.decode.kv_cache_bytes[0])
    ex.controls["kv_dtype"].value = "fp8"
    assert float(ex.decode.kv_cache_bytes[0]) == pytest.approx(kv16 / 2)
    _same(ex)


def test_int4_weights_shrink_the_weights(ex):
    ex.set(weights_dtype="bf16")
    w16 = float(ex.decode.weight_bytes[0])
    ex.controls["weights_dtype"].value = "int4-g128"
    assert float(ex.decode.weight_bytes[0]) < 0.4 * w16  # embeddings and LM head stay 16-bit
    _same(ex)
    ex.controls["weights_dtype"].value = "bf16"


def test_the_achievable_mode_is_slower_than_the_bound(ex):
    ex.set(mode="roofline")
    bound = float(ex.decode.latency_s[0])
    ex.controls["mode"].value = "achievable"
    assert float(ex.decode.latency_s[0]) > bound
    assert "mode achievable: an estimate" in ex.status.value
    _same(ex)
    ex.controls["mode"].value = "simple"
    _same(ex)
    assert "per-op table prices ops in mode roofline" in ex.status.value
    ex.controls["mode"].value = "roofline"


def test_tp_splits_the_weights_and_adds_collectives(ex):
    ex.set(tp=1)
    w1 = float(ex.decode.weight_bytes[0])
    ex.controls["tp"].value = 4
    assert float(ex.decode.weight_bytes[0]) == pytest.approx(w1 / 4, rel=0.02)
    assert any("allreduce" in op for op in ex.ops.op)
    ex.controls["tp"].value = 1


def test_model_hardware_and_context_controls(ex):
    ex.set(model="llama-2-13b", hardware="mi300x", context=4096, batch=8)
    d = _same(ex)
    assert d.model[0] == "llama-2-13b" and "llama-2-13b on mi300x, B=8, S=4096" in ex.status.value
    ex.controls["context"].value = 8192  # beyond llama-2-13b's max_context: computed, and said
    assert "beyond max_context" in ex.status.value
    _same(ex)


def test_settings_that_cannot_be_computed_say_why_in_one_line_and_keep_the_last_figures(ex):
    ex.set(model="qwen2.5-0.5b", tp=1, context=1024)
    image = ex.latency_image.value
    ex.controls["tp"].value = 4
    assert ex.error == "tp=: qwen2.5-0.5b has 14 query heads, not divisible by tp=4"
    assert "cannot compute" in ex.status.value and ex.latency_image.value == image
    ex.controls["tp"].value = 2
    assert ex.error is None
    with pytest.raises(TypeError, match="no control"):
        ex.set(colour="red")


def test_a_batch_off_the_slider_is_added_to_it():
    e = pm.explore("llama-3.1-8b", batch=48, context=3000)
    assert e.controls["batch"].value == 48 and 48 in e.controls["batch"].options
    assert e.controls["context"].value == 3000
