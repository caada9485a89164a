"""Defects a new user met in the first hour (issue 25), each pinned by the test that would have caught it."""
import dataclasses
import re

import pytest

import perfmodel as pm
from perfmodel import engine
from perfmodel.cli import main
from perfmodel.ops import Layout
from perfmodel.specs import load_hardware, load_model


def test_validate_published_shows_rates_in_tokens_per_second_and_times_in_seconds(capsys):
    assert main(["validate", "--published", "--category", "ttft-prefill"]) == 0
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if not ln.startswith("#") and ("throughput_tokens_per_s" in ln or "prefill_tokens_per_s" in ln)]
    ttft = [ln for ln in out.splitlines() if " ttft_s " in ln]
    assert rows and ttft
    # a rate was printed as a time ('9922 s'); every rate is now in tok/s, every time in s or ms
    assert all(re.search(r"\d s\b", ln) is None and ln.count("tok/s") == 3 for ln in rows)
    assert all("tok/s" not in ln and re.search(r"\d (ms|s)\b", ln) for ln in ttft)


def test_a_set_typo_gets_the_same_did_you_mean_as_in_a_yaml_file(capsys):
    assert main(["decode", "--set", "n_kv_head=4"]) == 2
    assert "did you mean n_kv_heads?" in capsys.readouterr().err
    assert main(["decode", "--set", "memory_bandwith=1 TB/s"]) == 2
    assert "did you mean memory_bandwidth?" in capsys.readouterr().err


def test_max_batch_takes_names_quantities_and_devices_as_well_as_objects():
    by_obj = pm.max_batch(load_model("llama-2-13b"), load_hardware("h100-sxm").memory_capacity, 1024)
    assert pm.max_batch("llama-2-13b", "h100-sxm", 1024) == by_obj == pm.max_batch("llama-2-13b", "80 GB", 1024)
    assert pm.max_batch("llama-2-13b", load_hardware("h100-sxm"), 1024) == by_obj
    assert pm.max_batch("llama-3.1-8b", "h100-sxm", 4096, "fp8") > pm.max_batch("llama-3.1-8b", "h100-sxm", 4096)
    with pytest.raises(pm.SpecError, match="did you mean"):
        pm.max_batch("llama-2-13", "h100-sxm", 1024)


def test_a_multi_device_layout_on_a_spec_without_node_fields_names_devices_per_node():
    hw = dataclasses.replace(load_hardware("h100-sxm"), devices_per_node=None, network_bandwidth=None)
    with pytest.raises(pm.SpecError, match="devices_per_node: is missing"):
        engine.evaluate(load_model("llama-3.1-8b"), hw, 8.0, 1024.0, layout=Layout(tp=2))


def test_cost_and_energy_are_given_only_for_rows_that_fit():
    t = pm.decode("llama-2-13b", "h100-sxm", batch=[64, 256], context=1024, price="2/h", energy=True)
    assert bool(t.fits[0]) and not bool(t.fits[1])
    assert t.cost_per_million_tokens[0] == pytest.approx(2.0 / 3600 / t.throughput_tok_s[0] * 1e6)
    assert t.cost_per_million_tokens.isna()[1] and t.energy_per_token_j.isna()[1]


@pytest.mark.parametrize("extra", [[], ["--weights-dtype", "mxfp4"]])
def test_gpt_oss_says_once_that_its_fp4_experts_have_no_measured_kernel_on_hopper(capsys, extra):
    assert main(["decode", "-m", "gpt-oss-20b", "--mode", "achievable", *extra]) == 0
    out, err = capsys.readouterr()
    assert err.count("no measured weight-only fp4 kernel") == 1
    assert "stores attention in bf16, experts in mxfp4" in out and "weights bf16" not in out


def test_errors_from_python_name_the_argument_the_caller_used():
    for kw, name in ((dict(weights_dtype="fp7"), "weights_dtype="), (dict(batch=0), "batch="),
                     (dict(mode="fast"), "mode="), (dict(sets={"n_kv_head": 4}), "sets=")):
        with pytest.raises(pm.SpecError) as e:
            pm.decode(**kw)
        assert str(e.value).startswith(name) and "--" not in str(e.value).split(":")[0]


@pytest.mark.parametrize("argv, opt", [(["decode", "--batch", "1,,8"], "--batch"),
                                       (["decode", "-H", "h100-sxm,"], "--hardware"),
                                       (["decode", "-H", "h100-sxm,h200", "--price", ",2/h"], "--price"),
                                       (["sweep", "--batch", "1,,2", "--context", "128"], "--batch")])
def test_an_empty_list_entry_is_an_error_naming_the_option_never_dropped(capsys, argv, opt):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"perfmodel: error: {opt}: an empty entry") and len(err.splitlines()) == 1


def test_price_takes_one_value_per_hardware_in_every_command_that_takes_several():
    t = pm.decode("llama-2-13b", "h100-sxm,h200", batch=8, context=1024, price="2/h,3.5/h")
    for i, p in enumerate((2.0, 3.5)):
        assert t.cost_per_million_tokens[i] == pytest.approx(p / 3600 / t.throughput_tok_s[i] * 1e6)
    r = pm.request("llama-2-13b", "h100-sxm,h200", price="2/h,3.5/h")
    assert r.cost_per_million_tokens[1] / r.cost_per_million_tokens[0] == pytest.approx(
        3.5 / 2 * r.throughput_tok_s[0] / r.throughput_tok_s[1])
    with pytest.raises(pm.SpecError, match="one per hardware"):
        pm.decode("llama-2-13b", "h100-sxm,h200,b200", price="2/h,3/h")


def test_kv_memory_of_one_token_outputs_is_a_result_not_a_division_by_zero():
    t = pm.kv_memory("llama-2-13b", "l40s", requests=16, prompt_len=128, output_len=1)
    assert len(t) == 3 and (t.requests == 16).all() and (t.throughput_tok_s > 0).all()


LONG = "/tmp/" + "a" * 300


@pytest.mark.parametrize("argv", [
    ["decode", "-m", "~nosuchuser/m.yaml"], ["decode", "-m", LONG + ".yaml"], ["decode", "-H", "~nosuchuser/h.yaml"],
    ["import-config", "~nosuchuser/config.json"], ["import-config", LONG + ".json"],
    ["validate", "--serving", "--sample", "~nosuchuser/s.csv"], ["validate", "--serving", "--points", LONG + ".csv"],
    ["decode", "--mode", "achievable", "--set", "impl.kernel_tables=~nosuchuser/r.csv"],
    ["sweep", "-o", "~nosuchuser/x.csv"], ["sweep", "-o", LONG + ".csv"], ["plot", "roofline", "-o", "~nosuchuser/x.png"],
    ["measure", "--out", "~nosuchuser/x"]])
def test_a_path_that_cannot_name_a_file_is_one_line_not_a_traceback(capsys, argv):
    """~nosuchuser/... raised RuntimeError and a name over 255 bytes OSError, as tracebacks (14 combinations)."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("perfmodel: error:") and len(err.splitlines()) == 1 and "Traceback" not in err
    assert "home folder" in err or "too long" in err or "No such file" in err
