"""Hardened input: the YAML/JSON loaders and the CLI, fuzzed with hypothesis.

Every outcome of `perfmodel.cli.main(argv)` is one of two things:
- exit 0 and a result: JSON that parses with no NaN/Infinity and finite numbers where a result is
  expected, no nan/inf in a table unless the input itself said so, no error or traceback on stderr
  (warnings and `wrote FILE` notes are fine), and no numpy overflow warning on the way;
- exit 2 and exactly one stderr line, starting `perfmodel: error:`, of bounded length.
Never a traceback (an exception escaping main fails the test), never another exit code, never code
run from a YAML tag.

Scale: each fuzz test runs WEIGHT x N cases, N = the hypothesis profile's max_examples (tests/conftest.py:
ci 60, `HYPOTHESIS_PROFILE=dev` 200) or PERFMODEL_FUZZ_EXAMPLES when set; docs/import-and-hardening.md
lists the totals. Sizes stay bounded so no case can hang: lists of at most 4 values, --generate <= 64,
whole numbers either <= 10**4 or beyond the loader's 2**53 limit. The regions where the code has
had bugs that fuzzing found (A: huge but finite inputs, B: unbounded work, C: 2**53 layers, D: deep
nesting, E: alias bombs, G: an empty model list) are pinned by the regression tests at the end (they
were xfail(strict=True) until the fixes landed); the generators can be widened into them.
"""
from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
import re
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings, strategies as st


from perfmodel import api, engine
from perfmodel.cli import main
from perfmodel.specs import catalog_dir, catalog_names, load_model

ROOT = Path(__file__).resolve().parent.parent
HF = ROOT / "tests" / "fixtures" / "hf"
_ENV_N = os.environ.get("PERFMODEL_FUZZ_EXAMPLES")
WEIGHTS = {"model_files": 2, "hardware_files": 1, "hf_configs": 1, "yaml_tags": 1, "argv": 4, "determinism": 1,
           "work": 3}


def fuzz(test: str):
    """Hypothesis settings for one fuzz test: WEIGHTS[test] x N cases (see the module docstring)."""
    n = int(_ENV_N) if _ENV_N else settings().max_examples
    return settings(max_examples=WEIGHTS[test] * n, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


# ---------------------------------------------------------------- running main and checking the contract
def run(argv: list) -> tuple[int, str, str, list]:
    """main(argv) in-process: (exit code, stdout, stderr, Python warnings raised on the way)."""
    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        warnings.simplefilter("always")
        code = main([str(a) for a in argv])  # an exception escaping here is a traceback: the test fails
    return code, out.getvalue(), err.getvalue(), caught


NONFINITE = {"nan", "-nan", "inf", "-inf", "infinity", "-infinity"}
# per command: JSON columns that must hold finite numbers in every record of a successful result
RESULT_COLUMNS = {"decode": ("latency_s", "throughput_tok_s", "memory_bytes"),
                  "prefill": ("latency_s", "throughput_tok_s", "memory_bytes"),
                  "request": ("latency_s", "throughput_tok_s", "ttft_s", "memory_bytes"),
                  "kv": ("kv_cache_bytes", "kv_bytes_per_token"), "budget": ("max_tokens", "max_batch"),
                  "intensity": ("flops", "bytes", "time_s")}


def _no_constant(name):
    raise AssertionError(f"JSON output contains {name}")


def check(argv: list, supplied: str = "") -> tuple[int, str]:
    """Run argv and assert the contract; `supplied` is input text whose nan/inf words may be echoed."""
    code, out, err, caught = run(argv)
    numeric = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert not numeric, f"{argv}: numpy warned {numeric[0].message} (a non-finite intermediate)"
    lines = err.splitlines()
    if code == 2:
        assert len(lines) == 1 and lines[0].startswith("perfmodel: error:"), (argv, err)
        assert len(lines[0]) <= 2000, (argv, lines[0][:200] + "...")
        return code, out
    assert code == 0, (argv, code, out, err)
    assert "Traceback" not in err and not any(line.startswith("perfmodel: error") for line in lines), (argv, err)
    words = lambda text: {w.lower() for w in re.findall(r"[-+]?[A-Za-z]+", text)}  # noqa: E731
    printed = words(out) & NONFINITE
    assert not printed - words(supplied + " " + " ".join(map(str, argv))), (argv, printed, out)
    if out.lstrip().startswith(("[", "{")):
        recs = json.loads(out, parse_constant=_no_constant)
        for col in RESULT_COLUMNS.get(str(argv[0]), ()):
            for r in recs:
                if col in r:
                    assert isinstance(r[col], (int, float)) and math.isfinite(r[col]) and r[col] >= 0, (argv, col, r)
    return code, out


# ---------------------------------------------------------------- mutation strategies
SMALL_INTS = st.integers(-10, 10**4)
EDGE_INTS = st.sampled_from([0, -1, 1, 2, 3, 7, 64, 4097, 2**53 + 1, 10**30, 2**63, -(2**63)])
# floats stay in [1e-12, 1e30] or are exactly 0/nan/inf (beyond: bug A), and skip whole numbers in (1e4, 2**53] (bug C)
FLOATS = st.one_of(st.sampled_from([0.0, -0.0, 0.5, 1.5, -2.5, 4096.0, float("nan"), float("inf"), float("-inf")]),
                   st.floats(1e-12, 1e30).filter(lambda v: not (v.is_integer() and 10**4 < v <= 2**53)))
UNITS = st.sampled_from(["B", "kB", "GB", "GiB", "TB/s", "GB/s", "Gb/s", "TFLOP/s", "TOPS", "W", "kW", "ms", "µs",
                         "parsecs", "gb", "GB/S", "FLOP", "B/s/s", ""])
QUANTITIES = st.builds(lambda n, u, sp: f"{n:g}{' ' if sp else ''}{u}",
                       st.one_of(st.sampled_from([0.0, -1.0, 80.0, 3.35, 989.5, 1e999, 1e-999]),
                                 st.floats(1e-6, 1e6)), UNITS, st.booleans())
WORDS = st.sampled_from(["80 GB", "3.35 TB/s", "989 TFLOP/s", "-1 TB/s", "0 GB", "nan GB", "inf TB/s", "８０ GB",
                         " 80 GB ", "gated", "plain", "swiglu", "rmsnorm", "layernorm", "rope", "learned", "G", "LG",
                         "GLR", "LLLG", "X", "", " ", "llama-2-7b", "h100-sxm", "base", "none", "null", "yes", "no",
                         "~", "true", "1e3", "0x10", "1_000", "١٢"])
TEXT = st.text(max_size=12)
SCALARS = st.one_of(SMALL_INTS, EDGE_INTS, FLOATS, QUANTITIES, WORDS, TEXT, st.booleans(), st.none())
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=3),
                   st.dictionaries(st.sampled_from(["value", "source", "bf16", "n_experts", "x"]), SCALARS, max_size=3))


def _paths(d: dict, prefix=()) -> list:
    """Key paths into a spec, one level of nesting deep (peak_flops.bf16, moe.n_experts, ...)."""
    out = []
    for k, v in d.items():
        out.append((*prefix, k))
        if isinstance(v, dict) and not prefix:
            out.extend(_paths(v, (k,)))
    return out


@st.composite
def mutated(draw, doc: dict) -> dict:
    """1-3 edits of a valid spec: delete a key, set a key (existing or new) to an odd value, rename a key."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        op = draw(st.sampled_from(["delete", "set", "set", "set", "rename", "new"]))
        if not paths:
            op = "new"
        if op == "new":
            doc[draw(st.one_of(TEXT, st.sampled_from(["d_modle", "base", "peak_flops", "moe", "mla", "tdp"])))] = \
                draw(VALUES)
            continue
        path = draw(st.sampled_from(paths))
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        if not isinstance(parent, dict) or path[-1] not in parent:
            continue
        if op == "delete":
            del parent[path[-1]]
        elif op == "set":
            value = draw(VALUES)
            if path[-1] == "n_layers" and isinstance(value, (int, float)) and not isinstance(value, bool):
                assume(not value > 10**4 or value > 2**53)  # 10**4 < n_layers <= 2**53: bug C below
            parent[path[-1]] = value
        else:
            parent[draw(TEXT)] = parent.pop(path[-1])
    return doc


@st.composite
def spec_text(draw, doc: dict) -> bytes:
    """A mutated spec as YAML bytes, sometimes damaged further at the text level."""
    text = yaml.safe_dump(draw(mutated(doc)), allow_unicode=True, sort_keys=draw(st.booleans()))
    damage = draw(st.sampled_from(["none", "none", "truncate", "insert", "tab", "bom", "bytes", "duplicate"]))
    if damage == "truncate":
        text = text[:draw(st.integers(0, len(text)))]
    elif damage == "insert":
        i = draw(st.integers(0, len(text)))
        text = text[:i] + draw(st.text(min_size=1, max_size=3)) + text[i:]
    elif damage == "tab":
        text = text.replace("  ", "\t", 1)
    elif damage == "bom":
        text = "\ufeff" + text
    elif damage == "duplicate" and text.splitlines():
        text += draw(st.sampled_from(text.splitlines())) + "\n"
    data = text.encode("utf-8")
    if damage == "bytes":
        i = draw(st.integers(0, len(data)))
        data = data[:i] + draw(st.binary(min_size=1, max_size=3)) + data[i:]
    return data


def _catalog(kind: str) -> dict:
    return {n: yaml.safe_load((catalog_dir(kind) / f"{n}.yaml").read_text()) for n in catalog_names(kind)}


MODEL_DOCS, HARDWARE_DOCS = _catalog("models"), _catalog("hardware")
HF_DOCS = {p.stem: json.loads(p.read_text()) for p in sorted(HF.glob("*.json"))}


@contextlib.contextmanager
def scratch():
    """A fresh folder for one example (hypothesis cannot share pytest's function-scoped tmp_path)."""
    d = Path(tempfile.mkdtemp(prefix="perfmodel-fuzz-"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------- fuzz: spec files
@fuzz("model_files")
@given(data=st.data(), name=st.sampled_from(sorted(MODEL_DOCS)))
def test_mutated_model_files_give_a_result_or_one_error_line(data, name):
    raw = data.draw(spec_text(MODEL_DOCS[name]))
    with scratch() as d:
        p = d / "model.yaml"
        p.write_bytes(raw)
        said = raw.decode("utf-8", "replace")
        check(["decode", "-m", p, "--batch", "1,64", "--context", "1,4096", "--format", "json"], said)
        check(["request", "-m", p, "--prompt", "16", "--generate", "4", "--format", "csv"], said)
        check(["show", p], said)


@fuzz("hardware_files")
@given(data=st.data(), name=st.sampled_from(sorted(HARDWARE_DOCS)))
def test_mutated_hardware_files_give_a_result_or_one_error_line(data, name):
    raw = data.draw(spec_text(HARDWARE_DOCS[name]))
    with scratch() as d:
        p = d / "gpu.yaml"
        p.write_bytes(raw)
        said = raw.decode("utf-8", "replace")
        check(["decode", "-m", "llama-2-7b", "-H", p, "--batch", "1,64", "--format", "json"], said)
        check(["budget", "-m", "qwen2.5-0.5b", "-H", p, "--format", "json"], said)
        check(["show", p], said)


@fuzz("hf_configs")
@given(data=st.data(), name=st.sampled_from(sorted(HF_DOCS)))
def test_mutated_hf_configs_import_or_give_one_error_line(data, name):
    doc = data.draw(mutated(HF_DOCS[name]))
    with scratch() as d:
        p = d / "config.json"
        p.write_text(json.dumps(doc, allow_nan=True))  # NaN/Infinity literals included: JSON has none
        check(["decode", "-m", p, "--batch", "1,8", "--context", "128", "--format", "json"], p.read_text())
        check(["import-config", p], p.read_text())


# ---------------------------------------------------------------- fuzz: YAML tags never run code
TAGS = ["!!python/object/apply:os.system ['touch {s}']",
        "!!python/object/apply:builtins.open ['{s}', 'w']",
        "!!python/object/apply:subprocess.check_call [['touch', '{s}']]",
        "!!python/object/apply:pathlib.Path.touch [!!python/object/apply:pathlib.Path ['{s}']]",
        "!!python/object/new:pathlib.Path ['{s}']", "!!python/name:os.system", "!!python/module:os",
        "!!python/object:builtins.object {{}}", "!!binary aGVsbG8=", "!!set {{a, b}}", "!!timestamp 2024-01-01",
        "!!omap [a: 1, b: 2]", "!!float .nan", "!!float .inf", "!!int 0x1F", "!!str 4096", "!custom {s}"]


@fuzz("yaml_tags")
@given(tag=st.sampled_from(TAGS), kind=st.sampled_from(["models", "hardware"]), data=st.data())
def test_yaml_tags_never_run_code(tag, kind, data):
    docs = MODEL_DOCS if kind == "models" else HARDWARE_DOCS
    doc = docs[data.draw(st.sampled_from(sorted(docs)))]
    key = data.draw(st.sampled_from([k for k in doc if k != "base"] + ["description"]))
    with scratch() as d:
        sentinel = d / "PWNED"
        lines = [f"{k}: {json.dumps(v)}" for k, v in doc.items() if k != key]
        lines.insert(data.draw(st.integers(0, len(lines))), f"{key}: {tag.format(s=sentinel)}")
        p = d / "spec.yaml"
        p.write_text("\n".join(lines) + "\n")
        argv = ["decode", "-m", p] if kind == "models" else ["decode", "-H", p]
        check([*argv, "--batch", "1", "--format", "json"], p.read_text())
        check(["decode", "--batch", "1", "--set", f"description={tag.format(s=sentinel)}"], tag)
        assert not sentinel.exists(), f"{tag} ran code"


# ---------------------------------------------------------------- fuzz: argument lists
COMMANDS = ["decode", "prefill", "request", "intensity", "kv", "budget", "show", "list", "import-config", "formats",
            "weights", "compare", "speculative", "attention", "generation-cost", "sweep", "plan", "frobnicate",
            "--help", "", "декодировать"]  # not `plot`: it imports matplotlib and draws figures
NUMBER_WORDS = ["0", "1", "2", "-1", "8", "64", "4096", "1.5", "1e3", "nan", "inf", "-inf", "", " ", "abc", "١٢",
                "0x10", "1_000", "9" * 30, "1,2", "1,,2", ",", "3,-1"]
LISTS = st.lists(st.sampled_from(NUMBER_WORDS[:9] + ["9" * 30]), min_size=1, max_size=4).map(",".join)
MODELS = st.sampled_from(["llama-2-7b", "llama-2-13b-gqa8", "deepseek-v2-lite", "mixtral-8x7b", "gpt-3-175b",
                          "llama-2-13b-linear", "llama-2-13b-hybrid", "gpt2.json", "gemma-2-2b.json",
                          "llama-9", "m.yaml", "llama-2-7b,qwen2.5-0.5b", "../x.yaml", "nope.json"])
HARDWARE = st.sampled_from(["h100-sxm", "a100-40gb", "tpu-v5e", "mi300x", "h900", "gpu.yaml", "h100-sxm,b200"])
# no empty name ("" or ","): bug G below
SET_KEYS = ["n_kv_heads", "n_layers", "d_model", "memory_bandwidth", "peak_flops.bf16", "moe.n_experts",
            "sliding_window", "layer_pattern", "kernel_overhead", "colour", "", "name", "mla.kv_lora_rank"]
SET_VALUES = ["8", "0", "-3", "1.5", "9" * 30, "4 TB/s", "1 PFLOP/s", "4 parsecs", "null", "[1, 2]", "{a: 1}",
              "LG", "yes", "", "!!python/object/apply:os.system ['true']", "'quoted", "١٢"]
OPTION_VALUES = {
    "-m": MODELS, "--model": MODELS, "-H": HARDWARE, "--hardware": HARDWARE,
    "--batch": st.one_of(LISTS, st.sampled_from(NUMBER_WORDS)),
    "--context": st.one_of(LISTS, st.sampled_from(NUMBER_WORDS)),
    "--prompt": st.one_of(LISTS, st.sampled_from(NUMBER_WORDS)),
    "--generate": st.sampled_from(["0", "1", "2", "16", "64", "-3", "1.5", "abc", ""]),  # > 64: bug B below
    "--mode": st.sampled_from(["roofline", "simple", "fast", ""]),
    "--weights-dtype": st.sampled_from(["bf16", "fp8", "int8", "int4", "int4-g64", "int4-g0", "nf4", "int3", "BF16"]),
    "--kv-dtype": st.sampled_from(["bf16", "fp8", "int4", "fp4", "x"]),
    "--act-dtype": st.sampled_from(["bf16", "fp8", "int8", "fp32", "q"]),
    "--attention": st.sampled_from(["fused", "unfused", "flash"]),
    "--format": st.sampled_from(["table", "json", "csv", "xml", ""]),
    "--set": st.builds(lambda k, v, eq: f"{k}{'=' if eq else ''}{v}", st.sampled_from(SET_KEYS),
                       st.sampled_from(SET_VALUES), st.booleans()),
    "--memory": st.sampled_from(["24GiB", "80 GB", "lots", "0", "-1 GB", "1e-999 GB"]),
    "--overhead": st.sampled_from(["0", "1.5GiB", "100 TB", "x"]),
    "--name": st.one_of(TEXT, st.just("my-model")),
    "-o": st.sampled_from(["out.yaml", "out.txt", "out.csv", "gpt2.json"]),
    "--tp": st.sampled_from(["1", "2", "8", "0", "-1", "3"]), "--pp": st.sampled_from(["1", "2", "4", "0", "x"]),
    "--ep": st.sampled_from(["1", "2", "8", "0"]), "--replicas": st.sampled_from(["1", "2", "0", "-2"]),
    "--microbatches": st.sampled_from(["1", "4", "0", "-1"]),
    "--gpus": st.sampled_from(["1", "8", "64", "0", "-1", "abc"]),
    "--price": st.sampled_from(["2.49/h", "2.49", "0/h", "-1/h", "free", "1e9/h", "2.49/day", ""]),
    "--max-latency": st.sampled_from(["50ms", "0 s", "-1 ms", "fast", "1 h"]),
    "--alpha": st.sampled_from(["0.6,0.8", "0", "1", "1.5", "-0.1", "nan", "x"]),
    "--gamma": st.one_of(LISTS, st.sampled_from(["0", "-1", "1.5"])),
    "--draft-cost": st.sampled_from(["0.05", "0", "-1", "2", "nan"]),
    "--draft": MODELS, "--target": MODELS, "--seq": st.one_of(LISTS, st.sampled_from(NUMBER_WORDS)),
    "--heads": st.sampled_from(["32", "0", "-4", "7"]), "--head-dim": st.sampled_from(["128", "0", "-1", "3"]),
    "--kv-heads": st.sampled_from(["8", "0", "5", "64"]), "--dtype": st.sampled_from(["fp16", "bf16", "int4", "x"]),
    "--tokens": st.one_of(LISTS, st.sampled_from(NUMBER_WORDS)), "--chunk-rows": st.sampled_from(["1", "7", "0", "-1"]),
}
FLAGS = ["--force", "--help", "--no-such-option", "-x", "--", "--energy", "--quantize-embeddings", "--no-progress"]


@st.composite
def argv_lists(draw) -> list:
    argv = [draw(st.sampled_from(COMMANDS))]
    if argv[0] in ("show", "import-config", "list"):
        argv.append(draw(st.sampled_from(["llama-2-7b", "h100-sxm", "gpt2.json", "gemma-2-2b.json", "gpu.yaml",
                                          "m.yaml", "models", "hardware", "", "x"])))
    for _ in range(draw(st.integers(0, 5))):
        if draw(st.integers(0, 9)) == 0:
            argv.append(draw(st.sampled_from(FLAGS + [s for s in NUMBER_WORDS[:5]])))
        else:
            opt = draw(st.sampled_from(sorted(OPTION_VALUES)))
            argv += [opt, draw(OPTION_VALUES[opt])]
    return argv


@contextlib.contextmanager
def cli_folder():
    """A scratch current folder holding the files the generated arguments name (outputs land there too)."""
    with scratch() as d:
        for f in ("gpt2", "gemma-2-2b"):
            shutil.copy(HF / f"{f}.json", d / f"{f}.json")
        (d / "m.yaml").write_text("base: llama-2-7b\nname: m\npublished_params: null\nn_kv_heads: 8\n")
        (d / "gpu.yaml").write_text((catalog_dir("hardware") / "l40s.yaml").read_text())
        old = os.getcwd()
        os.chdir(d)
        try:
            yield d
        finally:
            os.chdir(old)


@fuzz("argv")
@given(argv=argv_lists())
def test_random_argument_lists_give_a_result_or_one_error_line(argv):
    with cli_folder():
        check(argv)


# ---------------------------------------------------------------- fuzz: the commands that simulate, search or draw
# The rest of the CLI's surface: each starts from arguments that keep it small (a 1B model, 16-64 requests, one
# seed, a 2-row serving sample), then gets 1-4 fuzzed options. `measure` is left out: any valid call measures
# for a minute or more (tests/test_outputs.py and test_robustness.py hold its bad-input cases).
WORK_BASE = {
    "serve-sim": ["serve-sim", "-m", "llama-3.2-1b", "-H", "l4", "--requests", "16"],
    "kv-memory": ["kv-memory", "-m", "llama-3.2-1b", "-H", "l4", "--requests", "16"],
    "capacity": ["capacity", "-m", "llama-3.2-1b", "-H", "l4", "--requests", "64", "--seeds", "1"],
    "fleet": ["fleet", "fleet.csv"],
    "validate-serving": ["validate", "--serving", "--sample", "sample.csv", "--mode", "roofline"],
    "validate-published": ["validate", "--published", "--category", "decode-b1-16bit"],
    "plot": ["plot", "roofline", "-o", "fig.png"],
}
WORK_OPTIONS = {
    "--requests": st.sampled_from(["1", "16", "0", "-1", "1e9", "abc", "", "1,2"]),
    "--slots": st.sampled_from(["1", "8", "none", "0", "-3", "1e12", "x"]),
    "--rate": st.sampled_from(["1", "0.5", "0", "-1", "nan", "inf", "1e-30", "fast"]),
    "--seeds": st.sampled_from(["1", "2", "0", "1e15", "x"]), "--seed": st.sampled_from(["0", "-1", "x", "1e30"]),
    "--token-budget": st.sampled_from(["512", "none", "0", "1e9", "x"]),
    "--max-tokens": st.sampled_from(["0", "-1", "1000", "100000", "abc", ""]),  # never huge: that is real work
    "--workers": st.sampled_from(["1", "2", "0", "auto", "1e9", "x"]),
    "--cluster": st.sampled_from(["nowhere:1", "", "x"]),
    "--prompt-len": st.sampled_from(["64", "uniform:16,128", "lognormal:median=100,max=400", "0", "1e30", "x:1"]),
    "--output-len": st.sampled_from(["1", "16", "fixed:8", "0", "-5", "1e30", "lognormal:median=x"]),
    "--slo-ttft": st.sampled_from(["1s", "0 s", "-1 ms", "soon", "1e30 s"]),
    "--slo-tpot": st.sampled_from(["50ms", "0ms", "x"]), "--percentile": st.sampled_from(["99", "0", "100", "101", "x"]),
    "--gpus": st.sampled_from(["1", "2", "0", "x"]), "--ep": st.sampled_from(["1", "2", "0"]),
    "--tp": st.sampled_from(["1", "2", "0", "3"]), "--trace": st.sampled_from(["/dev/zero", "nope.csv", "m.yaml"]),
    "--concurrency": st.sampled_from(["1", "4", "0", "x"]), "--warmup": st.sampled_from(["0", "2", "-1"]),
    "--policy": st.sampled_from(["static", "continuous", "both", "x"]),
    "--kv-manager": st.sampled_from(["paged", "contiguous", "x"]), "--block-size": st.sampled_from(["16", "0", "x"]),
    "--timeline": st.sampled_from(["t.csv", "/dev/null", "", "nodir/t.csv"]),
    "--max-points": st.sampled_from(["1", "2", "0", "x"]), "--rounds": st.sampled_from(["1", "0", "x"]),
    "--mode": st.sampled_from(["roofline", "achievable", "simple", "x", ""]),
    "--format": st.sampled_from(["table", "json", "csv", "xml"]),
    "--price": st.sampled_from(["2.49/h", ",2/h", "-1/h", "x"]), "-o": st.sampled_from(["out.csv", "fig.png", ""]),
    "--cases": st.sampled_from(["/dev/zero", "nope.yaml", "m.yaml"]), "--category": st.sampled_from(["x", "", "moe"]),
    "--batch": st.one_of(LISTS, st.sampled_from(NUMBER_WORDS)), "--context": st.one_of(LISTS, st.sampled_from(NUMBER_WORDS)),
    "--set": OPTION_VALUES["--set"], "--weights-dtype": OPTION_VALUES["--weights-dtype"],
}


@st.composite
def work_argv(draw) -> list:
    argv = list(WORK_BASE[draw(st.sampled_from(sorted(WORK_BASE)))])
    for _ in range(draw(st.integers(1, 4))):
        opt = draw(st.sampled_from(sorted(WORK_OPTIONS)))
        argv += [opt, draw(WORK_OPTIONS[opt])]
    return argv


@fuzz("work")
@given(argv=work_argv())
def test_the_simulating_searching_and_drawing_commands_give_a_result_or_one_error_line(argv):
    from perfmodel.serving import silicon

    with cli_folder() as d:
        (d / "fleet.csv").write_text("model,hardware,gpus,requests,seeds\nllama-3.2-1b,l4,1,64,1\n")
        df = silicon.load()
        df[df.model_path.str.contains("Llama-3.1-8B") & (df.backend == "vllm")].head(2).to_csv(d / "sample.csv",
                                                                                              index=False)
        check(argv)


# ---------------------------------------------------------------- determinism
VALID = st.fixed_dictionaries({
    "cmd": st.sampled_from(["decode", "prefill", "request", "intensity", "kv", "budget", "show"]),
    "model": st.sampled_from(["llama-2-13b", "mixtral-8x7b", "deepseek-v3", "llama-2-13b-hybrid", "./gpt2.json"]),
    "hw": st.sampled_from(["h100-sxm", "mi300x", "tpu-v5e"]),
    "batch": st.lists(st.integers(1, 512), min_size=1, max_size=3).map(lambda v: ",".join(map(str, v))),
    "context": st.lists(st.integers(1, 32768), min_size=1, max_size=3).map(lambda v: ",".join(map(str, v))),
    "fmt": st.sampled_from(["table", "json", "csv"]),
    "wd": st.sampled_from(["bf16", "fp8", "int4"]),
})


def _valid_argv(v: dict) -> list:
    c = v["cmd"]
    if c == "show":
        return ["show", v["model"], "--weights-dtype", v["wd"], "--format", v["fmt"]]
    argv = [c, "-m", v["model"], "--format", v["fmt"]]
    if c in ("decode", "prefill", "request", "intensity", "budget"):
        argv += ["-H", v["hw"], "--weights-dtype", v["wd"]]
    if c == "request":
        return argv + ["--batch", v["batch"], "--prompt", v["context"], "--generate", "8"]
    if c == "intensity":
        return argv + ["--batch", v["batch"].split(",")[0], "--context", v["context"].split(",")[0]]
    if c == "budget":
        return argv + ["--context", v["context"]]
    return argv + ["--batch", v["batch"], "--context", v["context"]]


@fuzz("determinism")
@given(v=VALID)
def test_the_same_input_gives_the_same_bytes(v):
    with cli_folder():
        argv = _valid_argv(v)
        first, second = run(argv), run(argv)
    assert first[0] == 0 and first[:3] == second[:3]


# ---------------------------------------------------------------- numerical edges
@pytest.mark.parametrize("argv, option", [
    (["decode", "--batch", "0"], "--batch"), (["decode", "--context", "0"], "--context"),
    (["prefill", "--batch", "0"], "--batch"), (["prefill", "--context", "0"], "--context"),
    (["request", "--batch", "0"], "--batch"), (["request", "--prompt", "0"], "--prompt"),
    (["request", "--generate", "0"], "--generate"), (["intensity", "--batch", "0"], "--batch"),
    (["intensity", "--context", "0"], "--context"), (["kv", "--context", "0"], "--context"),
    (["kv", "--batch", "0"], "--batch"), (["budget", "--context", "0"], "--context"),
])
def test_zero_batch_or_context_is_rejected_with_a_message(argv, option):
    code, _, err, _ = run(argv)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"perfmodel: error: {option}") and "positive" in err, err


@pytest.mark.parametrize("argv", [
    ["decode", "--context", "8192"], ["prefill", "--context", "8192"],
    ["request", "--prompt", "4000", "--generate", "200"], ["intensity", "--context", "8192"],
    ["kv", "--context", "8192"], ["budget", "--memory", "80GB", "--context", "8192"],
])
def test_a_context_beyond_max_context_warns_once_and_still_computes(argv):
    code, out, err, _ = run([*argv, "-m", "llama-2-7b", "--format", "json"])  # max_context 4096
    assert code == 0 and json.loads(out)
    (line,) = err.splitlines()
    assert line.startswith("perfmodel: warning:") and "max_context" in line and "4096" in line, err


def test_405b_at_a_million_tokens_is_exact_in_float64():
    S, batch = 2**20, [1, 64, 2**20]
    t = api.decode("llama-3.1-405b", "h100-sxm", batch=batch, context=S)
    per_token = 2 * 8 * 128 * 126 * 2  # K and V x 8 KV heads x 128 x 126 layers x 2 bytes (bf16)
    for b, kv in zip(batch, t["kv_cache_bytes"], strict=True):
        exact = per_token * S * b  # Python ints: no overflow anywhere
        assert kv == exact if exact < 2**53 else kv == pytest.approx(exact, rel=2**-52)  # 5.7e17 B at B = 2**20
    for col in ("kv_cache_bytes", "memory_bytes", "weight_bytes", "latency_s", "throughput_tok_s", "intensity"):
        arr = np.asarray(t[col])
        assert arr.dtype == np.float64 and np.all(np.isfinite(arr)) and np.all(arr > 0), col
    assert t["weight_bytes"][0] == 2 * 405_853_388_800  # bf16 weights, exact
    pre = engine.evaluate(load_model("llama-3.1-405b"), api.load_hardware("h100-sxm"), [1, 16], [S], "prefill")
    causal_attention = 4 * (S * (S + 1) // 2) * 16384 * 126  # QK^T and AV over the causal pairs, N*H = 16384
    assert np.all(np.isfinite(pre["flops"])) and np.all(pre["flops"].ravel() > causal_attention)
    _, out = check(["decode", "-m", "llama-3.1-405b", "--batch", "1", "--context", str(S), "--format", "json"])
    assert json.loads(out)[0]["kv_cache_bytes"] == per_token * S  # printed as an exact integer


# ---------------------------------------------------------------- known bugs (fix, then remove the mark)
def _spec(tmp_path, text: str, name="m.yaml") -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


TINY = ("name: tiny\nsource: test\nvocab_size: 1000\nd_model: 256\nn_layers: 2\nn_heads: 4\nd_ff: 512\n"
        "max_context: 2048\n")
GPU = "name: gpu\nsource: test\nmemory_capacity: 80 GB\nmemory_bandwidth: 3 TB/s\npeak_flops: {bf16: 1e-300 FLOP/s}\n"


@pytest.mark.parametrize("argv", [["decode", "--batch", "1e300"], ["prefill", "--context", "1e200"],
                                  ["intensity", "--batch", "1e300"], ["decode", "-H", "GPU"]])
def test_bug_a_huge_but_finite_inputs_give_a_result_or_an_error(tmp_path, argv):
    argv = [_spec(tmp_path, GPU, "gpu.yaml") if a == "GPU" else a for a in argv]
    check([*argv, "--format", "json"])
    check([*argv, "--format", "table"])


class _TooMuchWork(BaseException):
    """Raised by the counting wrapper below; a BaseException so that main() does not swallow it."""


@pytest.mark.parametrize("argv", [
    ["request", "--batch", ",".join(map(str, range(1, 11))), "--prompt", "16", "--generate", "1000000000"],
    ["request", "--batch", ",".join(map(str, range(1, 101))), "--prompt", ",".join(map(str, range(1, 101))),
     "--generate", "2000"],
    ["decode", "--batch", ",".join(map(str, range(1, 5001))), "--context", ",".join(map(str, range(1, 5001)))]])
def test_bug_b_work_is_bounded_or_refused_up_front(monkeypatch, argv):
    real, points = engine.evaluate, [0]

    def counting(model, hw, batch, context, *a, **kw):
        points[0] += int(np.broadcast(np.asarray(batch), np.asarray(context)).size if not kw.get("grid", True)
                         else np.size(batch) * np.size(context))
        if points[0] > 10**7:  # (batch, context) points handed to the engine by one command
            raise _TooMuchWork(points[0])
        return real(model, hw, batch, context, *a, **kw)

    monkeypatch.setattr(engine, "evaluate", counting)
    check(argv)


def test_bug_c_an_absurd_layer_count_is_refused_or_computed(tmp_path):
    check(["decode", "-m", _spec(tmp_path, TINY.replace("n_layers: 2", f"n_layers: {2**53}")), "--format", "json"])


@pytest.mark.parametrize("where", ["file", "--set"])
def test_bug_d_deep_nesting_gives_one_error_line(tmp_path, where):
    deep = "[" * 5000 + "]" * 5000
    if where == "file":
        check(["decode", "-m", _spec(tmp_path, TINY + f"description: {deep}\n")])
    else:
        check(["decode", "--set", f"description={deep}"])


def test_bug_e_an_alias_bomb_gives_a_short_error_line(tmp_path):
    anchors = 'l0: &a0 ["x","x","x","x","x","x","x","x","x","x"]'
    for i in range(1, 6):
        anchors += f", l{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]"
    text = TINY.replace("d_model: 256", "d_model: *a5")
    text = text.replace("name: tiny\n", f"name: tiny\ndescription: {{{anchors}}}\n")  # anchors first, then *a5
    check(["decode", "-m", _spec(tmp_path, text)])


@pytest.mark.parametrize("argv", [["decode", "-m", ""], ["decode", "-H", ","], ["compare", "-m", ""]])
def test_bug_g_an_empty_model_or_hardware_list_is_refused(argv):
    check(argv)


@pytest.mark.parametrize("argv, says", [
    (["serve-sim", "-m", "llama-3.2-1b", "-H", "l4", "--requests", "16", "--token-budget", "1e9"],
     "--token-budget: '1e9' is over the largest value this option takes, 1,048,576"),
    (["kv-memory", "-m", "llama-3.2-1b", "-H", "l4", "--requests", "16", "--token-budget", "1e9"],
     "--token-budget: '1e9' is over the largest value"),
    (["serve-sim", "-m", "llama-3.2-1b", "-H", "l4", "--requests", "16", "--block-size", "1000000000000"],
     "--block-size: 1000000000000 is over the largest value this option takes, 1,048,576"),
])
def test_serving_sizes_that_would_allocate_gigabytes_are_refused_before_any_work(argv, says):
    """serve-sim --token-budget 1e9 allocated a 7.45 GiB array (found by the fuzz test above)."""
    code, _ = check(argv)
    assert code == 2
    _, _, err, _ = run(argv)
    assert says in err, err
