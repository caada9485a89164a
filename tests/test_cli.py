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
    (r,) = run_json(capsys, "show", "llama-2-13b")
    assert list(r)[:4] == ["name", "params", "kv_bytes_per_token", "weight_bytes"]
    assert {k: r[k] for k in list(r)[:4]} == {"name": "llama-2-13b", "params": 13_015_864_320,
                                              "kv_bytes_per_token": 819_200, "weight_bytes": 26_031_728_640}
    # then every field the table shows (it returned 4 fields where the table shows 21)
    assert main(["show", "llama-2-13b"]) == 0
    shown = [ln.split()[0] for ln in capsys.readouterr().out.splitlines() if ln.strip()]
    assert set(shown) == set(r)


def test_budget_answers_the_inverse_question(capsys):
    (r,) = run_json(capsys, "budget", "-m", "llama-2-13b", "--memory", "80GB", "--context", "1024")
    # the contract's fields, then every other field the table shows
    assert set(r) == {"model", "max_tokens", "max_batch", "weight_bytes", "context", "hardware", "memory_capacity",
                      "overhead_bytes", "kv_bytes_per_token"}
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
    assert set(recs[0]) == {"op", "phase", "flops", "bytes", "intensity", "time_s", "bound", "mode", "layers"}
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


# ---------------------------------------------------------------- consistency across commands (issue 16)
def test_version_prints_the_installed_version(capsys):
    from importlib.metadata import version

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"perfmodel {version('perfmodel')}"


@pytest.mark.parametrize("text, tokens", [("4k", 4000), ("4Ki", 4096), ("1M", 10**6), ("1Mi", 2**20), ("2.5k", 2500)])
def test_token_counts_take_si_and_binary_suffixes_kept_apart(capsys, text, tokens):
    (row,) = run_json(capsys, "decode", "--batch", "1", "--context", text)
    assert row["context"] == tokens


def test_counts_with_suffixes_work_in_sweep_ranges_and_the_python_api(capsys):
    import perfmodel as pm

    rows = run_json(capsys, "sweep", "--batch", "1", "--context", "1k:4k:x2")
    assert [r["context"] for r in rows] == [1000, 2000, 4000]
    assert pm.decode(batch=1, context="4Ki").context.tolist() == [4096]


def test_a_mistyped_model_name_suggests_the_catalog_names_it_resembles(capsys):
    assert main(["decode", "-m", "llama2-13b"]) == 2
    err = capsys.readouterr().err
    assert "llama2-13b: not a model catalog name" in err and "did you mean llama-2-13b" in err


@pytest.mark.parametrize("flag", ["-m", "--model", "--models"])
def test_sweep_takes_the_model_flag_every_command_takes(capsys, flag):
    rows = run_json(capsys, "sweep", flag, "llama-3.1-8b", "--batch", "1", "--context", "128")
    assert rows[0]["model"] == "llama-3.1-8b"


def _commands():
    from perfmodel.cli.main import _command

    return sorted(_command().commands)


@pytest.mark.parametrize("cmd", _commands())
def test_help_shows_real_types_never_python_ones(capsys, cmd):
    """Every option names what it takes (<int list>, <name list>, <format>, <time>, ...), never a Python type."""
    assert main([cmd, "--help"]) == 0
    text = capsys.readouterr().out.split("Options:")[-1]
    for bad in ("<str>", "<float>", "<list[str]>", "<integer>", "TEXT", "FLOAT"):
        assert bad not in text, (cmd, bad)


def test_the_format_help_lists_every_format_of_the_registry(capsys):
    from perfmodel.formats import known_formats

    assert main(["decode", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for f in known_formats():
        assert (f if not f.startswith(("int4-g", "int8-g")) else f.split("-g")[0] + "-g<N>") in text, f


def _table_and_json(capsys, argv):
    assert main(argv) == 0
    table = capsys.readouterr().out.splitlines()
    header = table[0].split("  ")
    assert main(argv + ["--format", "json"]) == 0
    return [h.strip() for h in header if h.strip()], json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("argv", [["budget"], ["budget", "--tp", "2"], ["decode", "--batch", "1,8"], ["kv"],
                                  ["decode", "--tp", "2", "--batch", "1"], ["request"], ["prefill", "--context", "512"],
                                  ["plan", "--gpus", "2", "--batch", "1"], ["compare", "--batch", "1"]])
def test_json_carries_every_field_the_table_shows(capsys, argv):
    from perfmodel.report import _HEAD, _LAYOUT_HEAD

    headers, rows = _table_and_json(capsys, argv)
    names = {**{v: k for k, v in _HEAD.items()}, **{v: k for k, v in _LAYOUT_HEAD.items()}}
    for h in headers:
        assert names.get(h, h) in rows[0] or h in rows[0], (h, sorted(rows[0]))


def test_with_a_layout_the_headers_say_per_device_per_replica_or_all_replicas(capsys):
    plain, _ = _table_and_json(capsys, ["decode", "--batch", "1"])
    spread, _ = _table_and_json(capsys, ["decode", "--batch", "1", "--tp", "2", "--replicas", "2"])
    assert "weights" in plain and "memory" in plain and "tokens/s" in plain
    assert {"weights/device", "memory/device", "KV cache/device", "batch/replica", "tokens/s (all replicas)"} <= set(spread)
    budget, _ = _table_and_json(capsys, ["budget", "--tp", "2"])
    assert "max batch/replica" in budget and "KV/token/device" in budget


def test_serve_sim_shows_p99_ttft_and_tpot(capsys):
    headers, rows = _table_and_json(capsys, ["serve-sim", "--requests", "16"])
    assert {"p99 TTFT", "p99 TPOT"} <= set(headers)
    assert all(r["p99_ttft_s"] >= r["mean_ttft_s"] * 0.999 or r["p99_ttft_s"] > 0 for r in rows)


def test_serve_sim_warns_when_requests_arrive_faster_than_they_are_served(capsys):
    assert main(["serve-sim", "--requests", "300", "--rate", "100", "--policy", "continuous", "--format", "json"]) == 0
    err = capsys.readouterr().err
    assert "warning:" in err and "the queue grows" in err
    assert main(["serve-sim", "--requests", "300", "--rate", "2", "--policy", "continuous", "--format", "json"]) == 0
    assert "queue grows" not in capsys.readouterr().err


def test_list_describes_every_model(capsys):
    rows = run_json(capsys, "list", "models")
    for r in rows:
        assert r["description"] and r["description"] != r["name"], r
    by = {r["name"]: r["description"] for r in rows}
    assert by["llama-2-13b"].startswith("13B dense; 40 layers, MHA (40 heads)")
    assert "MoE" in by["mixtral-8x7b"] and "12.9B active" in by["mixtral-8x7b"]
