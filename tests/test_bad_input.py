"""Every bad-input path gives one line naming the file and the field, and exit code 2; never a traceback."""
import textwrap

import pytest

from perfmodel.cli import main

GOOD_MODEL = textwrap.dedent("""\
    name: tiny
    source: test fixture
    vocab_size: 1000
    d_model: 256
    n_layers: 2
    n_heads: 4
    n_kv_heads: 2
    d_ff: 512
    max_context: 2048
    """)
GOOD_HW = textwrap.dedent("""\
    name: Test GPU
    source: test fixture
    memory_capacity: 24 GB
    memory_bandwidth: 1 TB/s
    peak_flops: {bf16: 100 TFLOP/s}
    """)


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(capsys, *argv):
    code, out, err = run(capsys, *argv)
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("perfmodel: error:")
    return lines[0]


@pytest.fixture
def write(tmp_path):
    def _w(name, text):
        p = tmp_path / name
        p.write_text(text)
        return str(p)
    return _w


def test_a_good_user_model_and_hardware_file_work_where_catalog_names_do(capsys, write):
    m, h = write("tiny.yaml", GOOD_MODEL), write("gpu.yaml", GOOD_HW)
    code, out, err = run(capsys, "decode", "-m", m, "-H", h, "--format", "json")
    assert code == 0 and '"model": "tiny"' in out


@pytest.mark.parametrize("edit, field, words", [
    (("max_context: 2048", "max_context: 2048\nd_modle: 3"), "d_modle", "unknown field"),
    (("vocab_size: 1000\n", ""), "vocab_size", "missing"),
    (("n_layers: 2", "n_layers: 0"), "n_layers", ">= 1"),
    (("n_layers: 2", "n_layers: -4"), "n_layers", ">= 1"),
    (("d_model: 256", "d_model: wide"), "d_model", "integer"),
    (("d_model: 256", "d_model: 256.5"), "d_model", "integer"),
    (("n_kv_heads: 2", "n_kv_heads: 3"), "n_kv_heads", "not divisible"),
    (("name: tiny", "name: tiny\nmlp: swiglu"), "mlp", "one of"),
    (("name: tiny", "name: tiny\ntied_embeddings: maybe"), "tied_embeddings", "true or false"),
    (("name: tiny", "name: tiny\nmoe: {n_experts: 4, n_active: 8}"), "moe.n_active", "exceeds"),
    (("name: tiny", "name: tiny\nlayer_pattern: LG"), "sliding_window", "no sliding_window"),
])
def test_bad_model_fields(capsys, write, edit, field, words):
    p = write("bad.yaml", GOOD_MODEL.replace(*edit))
    line = one_line_error(capsys, "decode", "-m", p)
    assert "bad.yaml" in line and field in line and words in line, line


@pytest.mark.parametrize("edit, field, words", [
    (("24 GB", "24 Gigabytes"), "memory_capacity", "unknown unit"),
    (("24 GB", "24 GB/s"), "memory_capacity", "expected bytes"),
    (("1 TB/s", "-1 TB/s"), "memory_bandwidth", "positive"),
    (("1 TB/s", "0 TB/s"), "memory_bandwidth", "positive"),
    (("{bf16: 100 TFLOP/s}", "{bf17: 100 TFLOP/s}"), "peak_flops.bf17", "unknown field"),
    (("source: test fixture\n", ""), "memory_capacity", "no source"),
])
def test_bad_hardware_fields(capsys, write, edit, field, words):
    p = write("gpu.yaml", GOOD_HW.replace(*edit))
    line = one_line_error(capsys, "decode", "-H", p)
    assert "gpu.yaml" in line and field in line and words in line, line


def test_a_mistyped_field_names_the_field_it_was_probably_meant_to_be(capsys, write):
    p = write("typo.yaml", "base: llama-2-13b\nname: typo\nn_layrs: 40\n")
    line = one_line_error(capsys, "decode", "-m", p)
    assert "typo.yaml" in line and "n_layrs" in line and "did you mean n_layers?" in line, line
    far = write("far.yaml", "base: llama-2-13b\nname: far\nzzz: 1\n")
    assert "did you mean" not in one_line_error(capsys, "decode", "-m", far)


def test_base_cycle_is_reported(capsys, write):
    write("a.yaml", "base: b.yaml\nname: a\n")
    b = write("b.yaml", "base: a.yaml\nname: b\n")
    line = one_line_error(capsys, "decode", "-m", b)
    assert "base" in line and "cycle" in line


def test_missing_base_is_reported(capsys, write):
    p = write("v.yaml", "base: llama-9-13b\nname: v\n")
    line = one_line_error(capsys, "decode", "-m", p)
    assert "v.yaml" in line and "base" in line


def test_invalid_yaml_and_python_tags_are_refused(capsys, write):
    assert "not valid YAML" in one_line_error(capsys, "decode", "-m", write("x.yaml", "name: [unclosed\n"))
    evil = write("evil.yaml", "name: !!python/object/apply:os.system ['echo PWNED']\n")
    line = one_line_error(capsys, "decode", "-m", evil)
    assert "evil.yaml" in line


def test_a_variant_states_only_what_differs(capsys, write):
    p = write("mine.yaml", "base: llama-2-13b\nname: mine\nsource: my what-if\nn_kv_heads: 10\npublished_params: null\n")
    code, out, _ = run(capsys, "kv", "-m", p, "--format", "json")
    assert code == 0 and '"kv_bytes_per_token": 204800' in out  # 819200 * 10 / 40


@pytest.mark.parametrize("argv, words", [
    (["decode", "--batch", "0"], "--batch"),
    (["decode", "--batch", "-3"], "--batch"),
    (["decode", "--batch", "x,2"], "--batch"),
    (["decode", "--batch", "1.5"], "--batch"),
    (["decode", "--context", "0"], "--context"),
    (["decode", "-m", "llama-9"], "llama-9"),
    (["decode", "-H", "h900"], "h900"),
    (["decode", "--mode", "fast"], "--mode"),
    (["decode", "--weights-dtype", "int3"], "--weights-dtype"),
    (["decode", "--set", "n_kv_heads"], "--set"),
    (["decode", "--set", "n_kv_heads=7"], "n_kv_heads"),
    (["decode", "--set", "colour=red"], "colour"),
    (["decode", "--set", "memory_bandwidth=4 parsecs"], "memory_bandwidth"),
    (["decode", "--format", "xml"], "--format"),
    (["decode", "--act-dtype", "fp8", "-H", "a100-80gb-sxm"], "fp8"),
    (["budget", "--memory", "lots"], "--memory"),
    (["budget", "--memory", "24GiB", "-H", "h100-sxm"], "not both"),
    (["list", "gpus"], "list"),
    (["intensity", "--batch", "abc"], "batch"),
    (["decode", "--no-such-option"], "no-such-option"),
    (["frobnicate"], "frobnicate"),
])
def test_bad_cli_arguments(capsys, argv, words):
    assert words in one_line_error(capsys, *argv)
