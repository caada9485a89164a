"""The Python API, fuzzed over its whole public surface: every public function, and the editing methods and
constructors of the public classes, called with arguments drawn from a pool of odd values (wrong types,
None, nan, inf, 2**63, empty and nested lists, unknown names, misspelt keywords, too many positionals).

Every call ends in one of two ways: a result, or a perfmodel error (SpecError, whose subclasses are the
documented ones) with a one-line message. Never a raw TypeError/ValueError/KeyError/AttributeError/
OverflowError, and never a run past its bound: each call runs under a watchdog of WATCHDOG_S seconds, far
above what any of these small calls needs (they take 0.01-4 s), so only a hang trips it.

Scale: each test runs WEIGHT x N examples, N = the hypothesis profile's max_examples (tests/conftest.py: ci 60,
derandomized) or PERFMODEL_FUZZ_EXAMPLES. The base arguments keep every call small (a 1B model, 16-64
requests, one seed) so the fuzzed argument is what decides the outcome.
"""
from __future__ import annotations

import contextlib
import inspect
import math
import os
import shutil
import signal
import tempfile
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import perfmodel as pm
from perfmodel.errors import SpecError

_ENV_N = os.environ.get("PERFMODEL_FUZZ_EXAMPLES")
WATCHDOG_S = 120  # a hang detector, not a speed claim (docs/speed.md holds the speeds)
TMP = Path(tempfile.mkdtemp(prefix="perfmodel-apifuzz-"))


def fuzz(weight: int):
    n = int(_ENV_N) if _ENV_N else settings().max_examples
    return settings(max_examples=weight * n, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ---------------------------------------------------------------- the surface
# Model, Hardware and Op are records: the checked ways to make them are load_model/load_hardware (files),
# .replace (fuzzed below) and build_ops. Precision and Layout check themselves when made, so they are fuzzed.
RECORDS = {"Model", "Hardware", "Op"}


def _public_callables() -> dict:
    return {n: getattr(pm, n) for n in pm.__all__ if callable(getattr(pm, n)) and n not in RECORDS
            and not (isinstance(getattr(pm, n), type) and issubclass(getattr(pm, n), BaseException))}


_MODEL, _HW = pm.load_model("llama-3.2-1b"), pm.load_hardware("l4")
METHODS = {"Model.replace": _MODEL.replace, "Hardware.replace": _HW.replace}
# what each keyword of a method/constructor may be called (their signatures are **kw or dataclass fields)
METHOD_FIELDS = {"Model.replace": ["n_layers", "n_layrs", "d_model", "n_kv_heads", "moe", "mla", "name",
                                   "sliding_window", "layer_pattern", "peak_flops"],
                 "Hardware.replace": ["memory_bandwidth", "memory_bandwith", "peak_flops", "memory_capacity",
                                      "devices_per_node", "name", "link_algorithms", "achievable", "n_layers"]}


def _sample_csv() -> str:
    """Two rows of the shipped silicon sample: serving_validation runs them in about a second."""
    from perfmodel.serving import silicon

    p = TMP / "sample.csv"
    if not p.exists():
        df = silicon.load()
        df[(df.model_path.str.contains("Llama-3.1-8B")) & (df.backend == "vllm")].head(2).to_csv(p, index=False)
    return str(p)


def _fleet_csv() -> str:
    p = TMP / "fleet.csv"
    p.write_text("model,hardware,gpus,requests,seeds\nllama-3.2-1b,l4,1,64,1\n")
    return str(p)


_CACHE: dict = {}


def _capacity_frame():
    if "cap" not in _CACHE:
        _CACHE["cap"] = pm.capacity("llama-3.2-1b", "l4", requests=64, seeds=1)
    return _CACHE["cap"]


def _points():
    if "pts" not in _CACHE:
        _CACHE["pts"] = pm.serving_validation(sample=_sample_csv(), modes=("roofline",))
    return _CACHE["pts"]


# arguments that keep each call small; the fuzzed arguments replace some of them
BASE = {
    "capacity": lambda: {"model": "llama-3.2-1b", "hardware": "l4", "requests": 64, "seeds": 1},
    "fleet": lambda: {"path": _fleet_csv()},
    "serve_sim": lambda: {"model": "llama-3.2-1b", "hardware": "l4", "requests": 16},
    "serve_runs": lambda: {"model": "llama-3.2-1b", "hardware": "l4", "requests": 16},
    "kv_memory": lambda: {"model": "llama-3.2-1b", "hardware": "l4", "requests": 16},
    "sweep": lambda: {"models": "llama-3.2-1b", "hardware": "l4", "batch": "1:8:x2", "context": "128:1024:x2"},
    "plan": lambda: {"model": "llama-3.2-1b", "hardware": "l4", "gpus": 2},
    "published_validation": lambda: {"categories": ["decode-b1-16bit"]},
    "serving_validation": lambda: {"sample": _sample_csv(), "modes": ("roofline",)},
    "serving_validation_summary": lambda: {"points": _points()},
    "validation": lambda: {"results": pm.SAVED_RUN},
    "launch_settings": lambda: {"capacity_frame": _capacity_frame()},
    "human": lambda: {"df": pm.decode(batch=[1, 8])},
    "show": lambda: {"name": "llama-3.2-1b"},
    "config_to_spec": lambda: {"path": str(Path(__file__).parent / "fixtures" / "hf" / "gpt2.json")},
    "build_ops": lambda: {"model": _MODEL, "B": 8, "T": 1, "S": 1024, "phase": "decode"},
    "param_count": lambda: {"model": _MODEL},
    "evaluate": lambda: {"model": _MODEL, "hw": _HW, "batch": [1, 8], "context": [1024]},
    "per_sequence": lambda: {"model": _MODEL, "context": 1024},
    "max_batch": lambda: {"model": _MODEL, "capacity": 24e9, "context": 1024},
    "parse_quantity": lambda: {"text": "80 GB", "dimension": "bytes"},
    "simulate": lambda: {"model": _MODEL, "hw": _HW, "traffic": pm.make_traffic(requests=8)},
    "load_model": lambda: {"ref": "llama-3.2-1b"},
    "load_hardware": lambda: {"ref": "l4"},
    "catalog_names": lambda: {"kind": "models"},
    "Precision": lambda: {},
    "Layout": lambda: {},
}
SLOW = {"capacity", "fleet", "serving_validation", "published_validation", "explore", "launch_settings",
        "serving_validation_summary"}
# where a fuzzed value would legitimately ask for hours of work: the caller's own bound, not a hang
NO_HUGE = {("serving_validation", "max_points"), ("serving_validation", "rounds"), ("capacity", "seeds"),
           ("fleet", "max_tokens")}

ODD = [None, True, False, 0, 1, 2, -1, 1.5, -0.0, float("nan"), float("inf"), -float("inf"), 2**63, 10**30, "", " ",
       "x", "8", "1e999", "-5", "nan", "llama-2-7b", "h100-sxm", "fp8", "decode", "achievable", "1,,2", "../nope.yaml",
       "/dev/zero", [], [1, 2], [None], [[1]], ["x"], (1, "a"), {}, {"a": 1}, {"n_kv_heads": "x"}, b"x", 1j,
       object(), set(), range(3), print]
PLAUSIBLE = [8, 64, 1024, "bf16", "int4", "roofline", "prefill", "fused", "unfused", "continuous", "static",
             "paged", "chunked", "llama-3.2-1b", "l4", "h100-sxm", "mixtral-8x7b", "deepseek-v2-lite", [1, 64],
             "50ms", "2.49/h", "80 GB", 0.9, 0.5, {"n_kv_heads": 4}, ("roofline",)]
HUGE = {2**63, 10**30, float("inf")}


def _surface() -> dict:
    return {**_public_callables(), **METHODS}


def _params(name: str, fn) -> list:
    if name in METHOD_FIELDS:
        return METHOD_FIELDS[name]
    return [p.name for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


class _Hang(Exception):
    pass


@contextlib.contextmanager
def watchdog(seconds: int):
    def fire(*_):
        raise _Hang()
    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def call(name: str, args: tuple, kwargs: dict):
    """Call one public function; return ('ok', result) or ('error', SpecError). Anything else fails the test."""
    fn = _surface()[name]
    cwd = os.getcwd()
    os.chdir(TMP)  # anything a call writes lands in the scratch folder
    try:
        with warnings.catch_warnings(), watchdog(WATCHDOG_S):
            warnings.simplefilter("ignore")
            try:
                return "ok", fn(*args, **kwargs)
            except SpecError as e:
                return "error", e
            except _Hang:
                pytest.fail(f"{name}(*{args!r:.200}, **{kwargs!r:.300}) ran past the {WATCHDOG_S} s watchdog")
            except Exception as e:  # noqa: BLE001 - the point of the test
                pytest.fail(f"{name}(*{args!r:.200}, **{kwargs!r:.300}) raised {type(e).__name__}: {e}"[:1500])
    finally:
        os.chdir(cwd)


def _check_error(name, e: SpecError):
    msg = str(e)
    assert "\n" not in msg and 0 < len(msg) <= 2000, (name, msg[:300])
    assert "Traceback" not in msg


@st.composite
def calls(draw, names: list):
    name = draw(st.sampled_from(names))
    fn = _surface()[name]
    params = _params(name, fn)
    kw = BASE.get(name, dict)()
    for _ in range(draw(st.integers(1, 3))):
        p = draw(st.sampled_from(params + ["bach", "n_layrs", "modle"]))
        v = draw(st.sampled_from(ODD + PLAUSIBLE))
        if (name, p) in NO_HUGE and isinstance(v, (int, float)) and not isinstance(v, bool) and (
                v in HUGE or (isinstance(v, float) and math.isinf(v))):
            v = 3
        kw[p] = v
    args = ()
    if draw(st.integers(0, 9)) == 0:  # positionals: some of the keyword values moved in front, maybe too many
        k = draw(st.integers(0, len(params) + 2))
        args = tuple(draw(st.sampled_from(ODD + PLAUSIBLE)) for _ in range(k))
        kw = {}
    return name, args, kw


CHEAP = sorted(n for n in _surface() if n not in SLOW)


def test_the_fuzz_covers_every_public_function():
    """A public function added later is fuzzed too: the lists above name the whole surface."""
    assert set(CHEAP) | SLOW == set(_surface())
    assert SLOW <= set(_surface())


@fuzz(20)
@given(c=calls(CHEAP))
def test_every_public_function_gives_a_result_or_a_perfmodel_error(c):
    name, args, kw = c
    outcome, value = call(name, args, kw)
    if outcome == "error":
        _check_error(name, value)


@fuzz(2)
@given(c=calls(sorted(SLOW)))
def test_the_searches_and_validations_give_a_result_or_a_perfmodel_error(c):
    name, args, kw = c
    outcome, value = call(name, args, kw)
    if outcome == "error":
        _check_error(name, value)


# ---------------------------------------------------------------- the cases the audit named, one by one
@pytest.mark.parametrize("name, kwargs, says", [
    ("decode", {"model": None}, "model=: must be given"),
    ("decode", {"batch": {}}, "batch=: must be one number or a list of them, got dict"),
    ("decode", {"bach": 8}, "did you mean 'batch'"),
    ("decode", {"weights_dtype": None}, "weights_dtype=: must be given"),
    ("decode", {"weights_dtype": "int3"}, "weights_dtype=: unknown format"),
    ("explore", {"batch": "lots"}, "batch=: must be a whole number from 1 to 1,000,000"),
    ("explore", {"model": 3}, "model=: must be a model name"),
    ("param_count", {"model": {}}, "model=: must be one model name"),
    ("catalog_names", {"kind": "gpus"}, "kind=: must be 'hardware', 'models' or 'impl'"),
    ("parse_quantity", {"text": "80 GB", "dimension": "furlongs"}, "dimension=: unknown dimension"),
    ("parse_quantity", {"text": [0], "dimension": "bytes"}, "text=: expected a bytes quantity"),
    ("formats", {"row": 0}, "row=: must be a whole number >= 1"),
    ("make_traffic", {"output_len": 10**30}, "over the longest length taken"),
    ("make_traffic", {"seed": " "}, "seed=: must be a number, got str"),
    ("serve_sim", {"rate": "soon", "requests": 8}, "rate=: must be a positive number of requests per second"),
    ("build_ops", {"model": "llama-3.2-1b", "B": 1, "T": 1, "S": 8, "phase": "verify"}, "phase=: must be prefill or decode"),
    ("intensity", {"attention": "flash"}, "attention=: must be fused or unfused"),
    ("serving_validation", {"max_points": 5}, "max_points=: 5,221 points x 2 mode(s)"),
    ("serving_validation_summary", {"points": {"a": [1]}}, "points: is not a serving_validation table"),
    ("published_validation", {"categories": 7}, "categories=: must be a text"),
    ("sweep", {"max_rows": "lots"}, "max_rows=: must be a number"),
])
def test_each_bad_argument_the_audit_found_is_one_perfmodel_error(name, kwargs, says):
    outcome, e = call(name, (), kwargs)
    assert outcome == "error" and says in str(e), (name, kwargs, str(e))


def test_an_edit_with_a_misspelt_field_says_which_field_was_meant():
    with pytest.raises(SpecError, match="did you mean n_layers"):
        _MODEL.replace(n_layrs=3)
    with pytest.raises(SpecError, match="did you mean memory_bandwidth"):
        _HW.replace(memory_bandwith="4 TB/s")
    with pytest.raises(SpecError, match="moe: must be a mapping"):
        _MODEL.replace(moe=" ")


def test_an_edited_hardware_spec_is_checked_and_parsed_as_a_file_is():
    h = _HW.replace(memory_bandwidth="4 TB/s", peak_flops={"bf16": "100 TFLOP/s"})
    assert h.memory_bandwidth == 4e12 and h.peak_flops == {"bf16": 1e14}
    assert h.sources["memory_bandwidth"] == "code"
    with pytest.raises(SpecError, match="memory_bandwidth"):
        _HW.replace(memory_bandwidth=-1)
    with pytest.raises(SpecError, match="peak_flops.bf17"):
        _HW.replace(peak_flops={"bf17": 1e14})


def test_precision_and_layout_check_themselves_when_made():
    with pytest.raises(SpecError, match="weights=: unknown format 'int3'"):
        pm.Precision("int3")
    with pytest.raises(SpecError, match="kv=: must be a format name"):
        pm.Precision("bf16", "bf16", 8)
    with pytest.raises(SpecError, match="tp=: must be a positive integer, got 0"):
        pm.Layout(tp=0)
    with pytest.raises(SpecError, match="over the"):
        pm.Layout(tp=10**7, replicas=10**6)
    assert pm.Layout(tp=2).devices == 2 and pm.Precision("fp8").weights == "fp8"


def test_a_lone_name_is_one_name_not_its_letters():
    """categories='x' once filtered by the letters of 'x'; now it is the one category 'x'."""
    one = pm.published_validation(categories="decode-b1-16bit")
    assert len(one) > 0 and all("decode-b1-16bit" in c.split(",") for c in one.category)


def test_the_serving_layer_reads_a_seed_and_a_rate_as_the_cli_does():
    """Below the public boundary too: a seed or rate that is not a number is one line, not int()'s ValueError."""
    from perfmodel.serving import traffic

    with pytest.raises(SpecError, match="--seed: must be a whole number >= 0"):
        traffic.make_traffic(requests=4, seed=" ")
    with pytest.raises(SpecError, match="--rate: must be a positive number"):
        traffic.make_traffic(requests=4, rate="soon")
    assert len(traffic.make_traffic(requests=4, rate="2.5", seed="7").arrival) == 4


def teardown_module():
    shutil.rmtree(TMP, ignore_errors=True)
