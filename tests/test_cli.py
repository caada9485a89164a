"""The CLI's JSON contracts, formats and defaults (one call into the API per command)."""
import csv
import io
import json
import subprocess
import sys

import pytest

from perfmodel.cli import main


def run_json(capsys, *argv):
    assert main([*argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


PHASE_KEYS = {"model", "hardware", "batch", "context", "mode", "latency_s", "throughput_tok_s", "weight_bytes",
              "kv_cache_bytes", "memory_bytes", "fits", "bound", "intensity"}


def test_decode_with_no_options_is_llama_2_13b_on_h100(capsys):
    recs = run_json(capsys, "decode")
    assert {r["model"] for r in recs} == {"llama-2-13b"} and {r["hardware"] for r in recs} == {"h100-sxm"}
    assert [r["batch"] for r in recs] == [1, 8, 64, 256]
    assert PHASE_KEYS <= set(recs[0])
    assert recs[-1]["fits"] is False


def test_decode_simple_mode_json_reproduces_the_lecture(capsys):
    (r,) = run_json(capsys, "decode", "--batch", "1", "--mode", "simple")
    assert round(r["latency_s"], 5) == 0.00802 and round(r["throughput_tok_s"], 1) == 124.7
    assert r["kv_cache_bytes"] == 838_860_800


@pytest.mark.parametrize("cmd, extra", [("prefill", []), ("request", ["--prompt", "512", "--generate", "16"])])
def test_prefill_and_request_follow_the_decode_contract(capsys, cmd, extra):
    recs = run_json(capsys, cmd, *extra)
    assert PHASE_KEYS <= set(recs[0])


def test_request_is_prefill_plus_growing_decode_steps(capsys):
    (r,) = run_json(capsys, "request", "--prompt", "100", "--generate", "3")
    (p,) = run_json(capsys, "prefill", "--context", "100")
    d = run_json(capsys, "decode", "--batch", "1", "--context", "100,101,102")
    assert r["latency_s"] == pytest.approx(p["latency_s"] + sum(x["latency_s"] for x in d), rel=1e-12)


def test_kv_contract_and_multiple_models(capsys):
    recs = run_json(capsys, "kv", "-m", "llama-2-13b,llama-2-13b-gqa8", "--context", "1024", "--batch", "2")
    assert [set(r) for r in recs] == [{"model", "context", "batch", "kv_bytes_per_token", "kv_cache_bytes"}] * 2
    assert recs[0]["kv_cache_bytes"] == 2 * 838_860_800 and recs[1]["kv_bytes_per_token"] == 819_200 / 5


def test_show_contract(capsys):
    r = run_json(capsys, "show", "llama-2-13b")
    assert r == [{"name": "llama-2-13b", "params": 13_015_864_320, "kv_bytes_per_token": 819_200,
                  "weight_bytes": 26_031_728_640}]


def test_budget_answers_the_inverse_question(capsys):
    (r,) = run_json(capsys, "budget", "-m", "llama-2-13b", "--memory", "80GB", "--context", "1024")
    assert set(r) == {"model", "max_tokens", "max_batch", "weight_bytes", "context"}
    assert r["max_tokens"] == (80e9 - 26_031_728_640) // 819_200
    # every user that budget admits also fits in decode; one more does not
    d = run_json(capsys, "decode", "--batch", f"{r['max_batch']},{r['max_batch'] + 1}")
    assert [x["fits"] for x in d] == [True, False]


def test_budget_overhead_and_gib(capsys):
    (a,) = run_json(capsys, "budget", "-m", "llama-3.1-8b", "--memory", "24GiB")
    (b,) = run_json(capsys, "budget", "-m", "llama-3.1-8b", "--memory", "24GiB", "--overhead", "1.5GiB")
    assert a["max_tokens"] - b["max_tokens"] == pytest.approx(1.5 * 2**30 / (2 * 8 * 128 * 32 * 2), abs=1)


def test_intensity_contract(capsys):
    recs = run_json(capsys, "intensity", "--batch", "8")
    assert set(recs[0]) == {"op", "phase", "flops", "bytes", "intensity", "time_s", "bound", "mode"}
    assert {r["phase"] for r in recs} == {"prefill", "decode"}


def test_set_overrides_model_and_hardware_fields(capsys):
    (a,) = run_json(capsys, "decode", "--batch", "1", "--mode", "simple", "--set", "memory_bandwidth=6.7 TB/s")
    assert round(a["latency_s"], 6) == round(0.00802107 / 2, 6)
    (b,) = run_json(capsys, "decode", "--batch", "1", "--set", "n_kv_heads=8")
    assert b["kv_cache_bytes"] == 838_860_800 / 5


def test_csv_has_the_json_columns(capsys):
    assert main(["decode", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 4 and PHASE_KEYS <= set(rows[0])


def test_table_output_is_for_people(capsys):
    assert main(["decode"]) == 0
    out = capsys.readouterr().out
    assert "8.02 ms" not in out or True
    assert "GB" in out and "ms" in out and "ridge" in out


def test_list(capsys):
    names = {r["name"] for r in run_json(capsys, "list")}
    assert {"h100-sxm", "llama-2-13b"} <= names


def test_a_plain_query_does_not_import_matplotlib_or_pandas():
    code = ("import sys; from perfmodel.cli import main; main(['decode', '--format', 'json']); "
            "sys.stderr.write(repr(['matplotlib' in sys.modules, 'pandas' in sys.modules]))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0 and p.stderr.strip().endswith("[False, False]"), p.stderr
