"""A fleet plan (issue 24): one capacity search per row of a YAML or CSV file, answered as one DataFrame that holds
exactly what each search gives alone; the work of the whole fleet bounded up front; bad files one line."""
import os
import warnings

import numpy as np
import pandas as pd
import pytest

import perfmodel as pm
from perfmodel.cli import main

CSV = """name,model,hardware,gpus,tp,prompt_len,output_len,slo_ttft,seeds,requests
small,llama-3.2-1b,l4,,1,256,"lognormal:median=32,max=128",0.5s,1,400
pair,llama-3.2-1b,l4,2,,256,"lognormal:median=32,max=128",0.5s,1,400
"""
YAML = """
- {name: small, model: llama-3.2-1b, hardware: l4, tp: 1, prompt_len: 256, output_len: "lognormal:median=32,max=128",
   slo_ttft: 0.5s, seeds: 1, requests: 400}
- {name: pair, model: llama-3.2-1b, hardware: l4, gpus: 2, prompt_len: 256, output_len: "lognormal:median=32,max=128",
   slo_ttft: 0.5s, seeds: 1, requests: 400}
"""


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


@pytest.fixture(scope="module")
def csv_frame(tmp_path_factory):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pm.fleet(_write(tmp_path_factory.mktemp("f"), "fleet.csv", CSV), workers=1)


def _same(a, b):
    for c in b.columns:
        x, y = a[c].to_numpy(), b[c].to_numpy()
        if x.dtype.kind == "f":
            assert np.array_equal(x, y, equal_nan=True), c
        else:
            assert list(x) == list(y), c


def test_each_fleet_rows_answer_is_its_own_capacity_search(csv_frame):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alone = pm.capacity("llama-3.2-1b", "l4", gpus=2, prompt_len=256, output_len="lognormal:median=32,max=128",
                            slo_ttft="0.5s", seeds=1, requests=400, workers=1)
    got = csv_frame[csv_frame.fleet_row == 1].reset_index(drop=True)
    assert len(got) == len(alone) and (got.name == "pair").all()
    _same(got, alone)


def test_yaml_and_csv_fleets_give_the_same_table(csv_frame, tmp_path):
    _same(pm.fleet(_write(tmp_path, "fleet.yaml", YAML), workers=1), csv_frame)


def test_workers_give_the_serial_table(csv_frame, tmp_path):
    _same(pm.fleet(_write(tmp_path, "fleet.csv", CSV), workers=2), csv_frame)


def test_one_row_per_fleet_row_is_chosen_where_a_goodput_exists(csv_frame):
    chosen = csv_frame[csv_frame.chosen]
    assert sorted(chosen.fleet_row) == [0, 1] and chosen.goodput_rps.notna().all() and chosen.pareto.all()


def test_the_fleets_work_is_bounded_in_all_not_per_row(tmp_path, capsys):
    """Each row alone is under the limit; the two together are not: refused before any simulation."""
    path = _write(tmp_path, "fleet.csv", CSV)
    from perfmodel.serving import capacity as cap
    from perfmodel.serving.fleet import _kwargs, read

    ests = [cap.run(**_kwargs(r), estimate_only=True) for r in read(path)]
    limit = int(max(ests) * 1.01)
    assert sum(ests) > limit
    assert main(["fleet", path, "--max-tokens", str(limit), "--workers", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--max-tokens" in err[0], err


def test_the_cli_prints_each_rows_choice_and_writes_every_row(tmp_path, capsys, csv_frame):
    path, out = _write(tmp_path, "fleet.csv", CSV), tmp_path / "all.csv"
    assert main(["fleet", path, "--workers", "1", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "small" in text and "pair" in text and "2 fleet rows" in text
    assert len(pd.read_csv(out)) == len(csv_frame)


@pytest.mark.parametrize("text,what", [
    ("name,model,hardware,tpp\nx,llama-3.2-1b,l4,1\n", "tpp: is not a fleet field (did you mean tp?)"),
    ("name,hardware\nx,l4\n", "model: is required"),
    ("model,hardware,output_len\nllama-3.2-1b,l4,lognormal:median=3,max=9\n", "more cells than the header"),
    ("model,hardware,gpus,tp\nllama-3.2-1b,l4,2,1\n", "not both"),
    ("model,hardware,seeds\nllama-3.2-1b,l4,1.5\n", "seeds: must be a whole number"),
    ("model,hardware,slo_tpot\nllama-3.2-1b,l4,fast\n", "row 1 (llama-3.2-1b on l4)"),
    ("model,hardware\n", "has no rows"),
])
def test_a_bad_fleet_file_is_one_line_naming_the_row_and_field(text, what, tmp_path, capsys):
    path = _write(tmp_path, "bad.csv", text)
    assert main(["fleet", path, "--workers", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and what in err[0], err


def test_a_device_or_fifo_is_refused_before_reading(tmp_path, capsys):
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    for path in ("/dev/zero", str(fifo)):
        assert main(["fleet", path]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "not a regular file" in err[0], err


def test_a_fleet_file_over_a_mebibyte_is_refused(tmp_path, capsys):
    path = _write(tmp_path, "big.csv", "model,hardware\n" + "llama-3.2-1b,l4\n" * 70000)
    assert main(["fleet", path]) == 2
    assert "over the 1,048,576-byte limit" in capsys.readouterr().err


def test_the_fleet_table_says_whether_its_times_are_the_ideal_bound(tmp_path, capsys):
    assert main(["fleet", _write(tmp_path, "fleet.csv", CSV), "--workers", "1"]) == 0
    assert "# mode roofline: an ideal bound" in capsys.readouterr().out


def test_a_yaml_fleet_is_a_list_of_rows_or_a_mapping_of_rows_alone(tmp_path):
    from perfmodel.errors import SpecError
    from perfmodel.serving import fleet

    one = "- {model: llama-3.2-1b, hardware: l4}\n- {model: llama-3.2-1b, hardware: l4, tp: 2}\n"
    bare = fleet.read(_write(tmp_path, "a.yaml", one))
    wrapped = fleet.read(_write(tmp_path, "b.yaml", "rows:\n" + "".join("  " + ln + "\n" for ln in one.splitlines())))
    assert bare == wrapped and len(bare) == 2 and bare[1]["tp"] == 2
    for text in ("rows: []\nextra: 1\n", "- {model: llama-3.2-1b, hardware: l4}\n- 3\n", "model: x\n"):
        with pytest.raises(SpecError, match="must be a list of rows"):
            fleet.read(_write(tmp_path, "c.yaml", text))


def test_a_fleet_takes_up_to_max_rows_and_names_the_row_of_a_bad_field(tmp_path):
    from perfmodel.errors import SpecError
    from perfmodel.serving import fleet

    row = "llama-3.2-1b,l4\n"
    assert len(fleet.read(_write(tmp_path, "max.csv", "model,hardware\n" + row * fleet.MAX_ROWS))) == 1000
    with pytest.raises(SpecError, match="1,001 rows, over the 1,000"):
        fleet.read(_write(tmp_path, "over.csv", "model,hardware\n" + row * (fleet.MAX_ROWS + 1)))
    with pytest.raises(SpecError, match="row 2") as e:
        fleet.read(_write(tmp_path, "two.csv", "model,hardware,gpus,replicas\nllama-3.2-1b,l4,,\nllama-3.2-1b,l4,2,2\n"))
    assert "not both" in str(e.value)  # gpus with any one of tp, ep, replicas


def test_a_row_without_a_layout_is_one_device_and_one_without_gpus_keeps_its_tp(tmp_path):
    """A fleet row that names neither gpus nor tp asks for one layout of tp 1, ep 1, one replica; a row with tp
    keeps it; a row with gpus searches the layouts of that many devices (no tp is set)."""
    from perfmodel.serving import fleet

    rows = fleet.read(_write(tmp_path, "l.csv", "model,hardware,tp,gpus\nllama-3.2-1b,l4,,\nllama-3.2-1b,l4,4,\n"
                                                "llama-3.2-1b,l4,,8\n"))
    assert [r.get("tp") for r in rows] == [1, 4, None] and rows[2]["gpus"] == 8
    k = fleet._kwargs(rows[0])
    assert (k["tp"], k["ep"], k["replicas"], k["gpus"], k["pp"]) == (1, 1, 1, None, 1)


def test_a_fleet_row_runs_the_capacity_search_with_its_defaults_and_the_same_column_types(csv_frame):
    """pm.capacity's own defaults (block size, cost quantum, token budget) are the fleet row's, a token budget of
    'none' is whole prompts, and the fleet table's columns have the capacity table's types."""
    import inspect

    from perfmodel.serving import fleet

    d = inspect.signature(pm.capacity).parameters
    k = fleet._kwargs({"model": "llama-3.2-1b", "hardware": "l4"})
    assert (k["block_size"], k["cost_quantum"], k["token_budget"]) == (
        d["block_size"].default, d["cost_quantum"].default, d["token_budget"].default)
    assert fleet._kwargs({"model": "m", "hardware": "h", "token_budget": "None"})["token_budget"] is None
    assert fleet._kwargs({"model": "m", "hardware": "h", "token_budget": 512})["token_budget"] == 512
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alone = pm.capacity("llama-3.2-1b", "l4", gpus=2, prompt_len=256, output_len="lognormal:median=32,max=128",
                            slo_ttft="0.5s", seeds=1, requests=400, workers=1)
    for c in alone.columns:
        assert csv_frame[c].dtype == alone[c].dtype, c
    assert csv_frame["fleet_row"].dtype.kind == "i" and csv_frame["chosen"].dtype == bool


def test_a_fleet_row_s_whole_numbers_start_at_one_its_seed_at_zero_and_disaggregate_is_a_boolean(tmp_path):
    from perfmodel.errors import SpecError
    from perfmodel.serving import fleet

    head = "model,hardware,tp,seed,disaggregate\n"
    rows = fleet.read(_write(tmp_path, "ok.csv", head + "llama-3.2-1b,l4,1,0,yes\nllama-3.2-1b,l4,2,3,0\n"))
    assert [(r["tp"], r["seed"], r["disaggregate"]) for r in rows] == [(1, 0, True), (2, 3, False)]
    for bad, what in (("0,0,no", "tp: must be a whole number >= 1"), ("1,-1,no", "seed: must be a whole number >= 0"),
                      ("1,0,maybe", "disaggregate: must be true or false")):
        with pytest.raises(SpecError, match=what):
            fleet.read(_write(tmp_path, "bad.csv", head + "llama-3.2-1b,l4," + bad + "\n"))


def test_a_fleet_row_s_search_takes_pm_capacity_s_own_defaults():
    """seeds, tolerance, block size, cost quantum and token budget left out of a row are pm.capacity's."""
    import inspect

    from perfmodel.serving import fleet

    d = inspect.signature(pm.capacity).parameters
    k = fleet._kwargs({"model": "llama-3.2-1b", "hardware": "l4"})
    for name in ("seeds", "tolerance", "block_size", "cost_quantum", "token_budget", "seed", "percentile"):
        assert k[name] == d[name].default, name
    assert fleet._kwargs({"model": "m", "hardware": "h", "token_budget": "None"})["token_budget"] is None
