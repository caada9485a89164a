"""The Python API: DataFrames with SI columns, specs editable in code, the op list exposed."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


# ---------------------------------------------------------------- the package namespace (issue 16)
import doctest  # noqa: E402
import inspect  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import pandas as pd  # noqa: E402

from perfmodel import api, grid, measure, parallel, serving, whatif  # noqa: E402
from perfmodel.measure import published  # noqa: E402

PUBLIC = [getattr(pm, n) for n in pm.__all__ if inspect.isfunction(getattr(pm, n))]


@pytest.mark.parametrize("fn", PUBLIC, ids=lambda f: f.__name__)
def test_every_public_function_has_a_real_signature_and_documents_parameters_units_and_an_example(fn):
    sig = inspect.signature(fn)
    assert not [p for p in sig.parameters.values() if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)], sig
    doc = inspect.getdoc(fn) or ""
    assert "Returns\n-------" in doc and "Example\n-------" in doc and ">>>" in doc, fn.__name__
    if sig.parameters and fn.__name__ != "serve_runs":  # serve_runs: "parameters as in serve_sim"
        params = doc.split("Parameters\n----------\n")[1].split("\n\n")[0]
        described = {n.strip() for line in params.splitlines() if not line.startswith(" ")
                     for n in line.split(" : ")[0].split(",")}
        assert set(sig.parameters) <= described, set(sig.parameters) - described


WRAPS = [(pm.point, api.point), (pm.capacity, __import__('perfmodel.serving.capacity', fromlist=['capacity']).capacity), (pm.decode, api.decode), (pm.prefill, api.prefill), (pm.request, api.request), (pm.intensity, api.intensity),
         (pm.kv, api.kv), (pm.budget, api.budget), (pm.show, api.show), (pm.list_specs, api.list_specs),
         (pm.ridge, api.ridge), (pm.compare, whatif.compare), (pm.formats, whatif.formats),
         (pm.weights, whatif.weights), (pm.speculative, whatif.speculative), (pm.plan, parallel.plan),
         (pm.sweep, grid.sweep), (pm.serve_sim, serving.serve_runs), (pm.serve_runs, serving.serve_runs),
         (pm.kv_memory, serving.kv_memory), (pm.validation, measure.validation), (pm.make_traffic, serving.make_traffic),
         (pm.simulate, serving.simulate), (pm.load_model, pm.specs.load_model),
         (pm.load_hardware, pm.specs.load_hardware), (pm.evaluate, engine.evaluate),
         (pm.per_sequence, engine.per_sequence), (pm.max_batch, engine.max_batch), (pm.build_ops, pm.ops.build_ops)]


@pytest.mark.parametrize("mine,theirs", WRAPS, ids=lambda f: f"{f.__module__}.{f.__name__}")
def test_the_namespace_functions_take_exactly_the_parameters_of_what_they_call(mine, theirs):
    a, b = inspect.signature(mine).parameters, inspect.signature(theirs).parameters
    assert list(a) == list(b)
    assert [p.default for p in a.values()] == [p.default for p in b.values()]


def test_the_docstring_examples_run():
    from perfmodel.frames import base, objects, queries, runs as runs_  # the public layer: __init__ re-exports it

    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    runs = [doctest.testmod(mod, extraglobs={"pm": pm}, optionflags=flags)
            for mod in (pm, base, queries, runs_, objects)]
    assert sum(r.attempted for r in runs) > 40 and all(r.failed == 0 for r in runs)


def test_the_module_docstring_says_what_returns_a_dataframe_and_what_does_not():
    doc = pm.__doc__
    assert "every function returns a DataFrame" not in doc
    for name in ("decode", "compare", "plan", "build_ops", "evaluate", "ridge", "load_model", "explore"):
        assert name in doc


@pytest.mark.parametrize("call,cols", [
    (lambda: pm.compare(["llama-2-13b", "llama-2-13b-gqa8"], batch=64, context=1024), ["max_batch", "batch"]),
    (lambda: pm.speculative(), ["gamma", "best_gamma"]),
    (lambda: pm.speculative(draft="llama-2-7b", target="llama-2-70b"), ["gamma", "best_gamma", "batch"]),
    (lambda: pm.serve_sim(requests=8, slots=4, output_len="16"), ["requests", "sequences", "tokens", "steps", "slots"]),
    (lambda: pm.kv_memory(requests=8, output_len="16"), ["requests", "block_size", "peak_sequences"]),
    (lambda: pm.plan(batch=[8]), ["tp", "pp", "ep", "replicas", "devices", "batch"]),
    (lambda: pm.budget(), ["max_batch", "max_tokens", "context"]),
    (lambda: pm.weights(), ["params"]),
    (lambda: pm.intensity(), ["layers"]),
    (lambda: pm.decode(tp=2, batch=[1, 8]), ["tp", "devices", "batch", "context"]),
])
def test_counts_come_back_as_integers(call, cols):
    df = call()
    assert isinstance(df, pd.DataFrame)
    for c in cols:
        assert pd.api.types.is_integer_dtype(df[c]), (c, df[c].dtype)


def test_whatif_functions_are_in_the_namespace_and_return_dataframes():
    for df in (pm.compare(["llama-2-13b", "llama-2-13b-mla"]), pm.formats(), pm.weights("llama-2-13b", "int8"),
               pm.speculative(alpha=[0.7], gamma=[2]), pm.plan(batch=[1])):
        assert isinstance(df, pd.DataFrame) and len(df)
    assert pm.plan(batch=[1]).attrs["summary"]["min_devices"] == 2


def test_the_context_warning_points_at_the_callers_line_in_python_words():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pm.decode("llama-2-7b", batch=1, context=8192); line = inspect.currentframe().f_lineno  # noqa: E702
        pm.request("llama-2-7b", prompt=4000, generate=200)
    ctx = [w for w in caught if issubclass(w.category, pm.ContextWarning)]
    assert len(ctx) == 2
    assert all(w.filename == __file__ for w in ctx) and ctx[0].lineno == line
    assert str(ctx[0].message).startswith("llama-2-7b: context=8192 is beyond max_context=4096")
    assert str(ctx[1].message).startswith("llama-2-7b: prompt+generate=4200 is beyond max_context=4096")
    assert not any("--" in str(w.message) for w in ctx)


def test_the_cli_keeps_its_own_wording_of_the_context_warning(capsys):
    from perfmodel.cli import main

    assert main(["decode", "-m", "llama-2-7b", "--context", "8192", "--batch", "1"]) == 0
    err = capsys.readouterr().err
    assert "llama-2-7b --context 8192 > 4096" in err and "context=8192" not in err


def test_human_shows_any_result_in_human_units():
    df = pm.decode(batch=[1, 64])
    h = pm.human(df)
    assert list(h.columns[:7]) == ["model", "hardware", "batch", "context", "mode", "latency", "tokens/s"]
    assert h.loc[0, "latency"] == "7.928 ms" and h.loc[1, "KV cache"] == "53.69 GB" and h.loc[0, "fits"] == "yes"
    assert df.pm.human().equals(h)
    assert list(pm.human(df, headers=False).columns) == list(df.columns)
    assert pm.human({"time_s": [0.5e-3]}).loc[0, "time"] == "500 µs"


def test_the_saved_run_ships_inside_the_package_and_matches_the_documented_one():
    docs = Path(__file__).resolve().parent.parent / "docs" / "validation" / "cpu-quick"
    names = sorted(p.name for p in docs.iterdir())
    assert sorted(p.name for p in pm.SAVED_RUN.iterdir()) == names
    for n in names:
        assert (pm.SAVED_RUN / n).read_bytes() == (docs / n).read_bytes(), n
    assert pm.validation(pm.SAVED_RUN).equals(pm.validation(docs))


def test_published_validation_passes_its_arguments():
    p = pm.published_validation(categories=["moe"])
    assert len(p) and all("moe" in c for c in p.category)
    assert inspect.signature(pm.published_validation).parameters.keys() == {"cases", "categories"}
    assert list(inspect.signature(published.published).parameters) == ["path", "categories"]


@given(st.sampled_from(pm.catalog_names("models")), st.sampled_from(["h100-sxm", "b200", "mi300x"]),
       st.integers(1, 512), st.integers(1, 65536), st.sampled_from(["decode", "prefill"]),
       st.sampled_from(["roofline", "achievable", "simple"]))
@settings(max_examples=60, deadline=None)
def test_point_is_the_decode_and_prefill_row(name, hw, B, S, phase, mode):
    """pm.point answers one point with the op list and time model of decode/prefill: the same numbers, to the
    last bits that the order of a sum can move (kimi-k2 at B=8, S=1: 0.1003524257126007 against
    0.10035242571260075, a scalar against a vector evaluation)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = pm.point(name, hw, B, S, phase, mode)
        row = (pm.decode if phase == "decode" else pm.prefill)(name, hw, batch=B, context=S, mode=mode).iloc[0]
    for k in ("latency_s", "throughput_tok_s", "weight_bytes", "kv_cache_bytes", "memory_bytes", "intensity",
              "fits", "bound"):
        if isinstance(p[k], float):
            assert math.isclose(p[k], float(row[k]), rel_tol=1e-12, abs_tol=0.0), k
        else:
            assert p[k] == row[k], k
