"""Answers a user can deploy (issue 24): `plan` and `capacity` print the Pareto front unless --all, say which rows
cross nodes, and print the chosen row's launch settings for the engine the profile names."""
import json
import warnings

import numpy as np
import pytest

import perfmodel as pm
from perfmodel.cli import main

SMALL = ["-m", "llama-3.2-1b", "-H", "h100-sxm", "--gpus", "2", "--prompt-len", "uniform:32,128", "--output-len",
         "lognormal:median=16,max=64", "--slots", "32", "--slo-ttft", "0.25s", "--requests", "600", "--seeds", "1",
         "--workers", "1"]


def _rows(text: str) -> list[str]:
    lines = text.splitlines()
    return [ln for ln in lines[2:] if ln and not ln.startswith("#") and not ln.startswith(("vllm ", "python ", "cat ",
                                                                                           "trtllm", "kv_", "EOF"))]


NODES = {"devices_per_node": 1}  # one H100 per node (InfiniBand between them: the spec's network fields)
NODE_SETS = [x for k, v in NODES.items() for x in ("--set", f"{k}={v}")]


@pytest.fixture(scope="module")
def small_frame():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pm.capacity("llama-3.2-1b", "h100-sxm", gpus=2, prompt_len="uniform:32,128",
                           output_len="lognormal:median=16,max=64", slots=32, slo_ttft="0.25s", requests=600, seeds=1,
                           workers=1, sets=NODES)


def test_capacity_prints_the_pareto_front_and_every_row_with_all(capsys, small_frame):
    assert main(["capacity", *SMALL, *NODE_SETS]) == 0
    front = _rows(capsys.readouterr().out)
    assert main(["capacity", *SMALL, *NODE_SETS, "--all"]) == 0
    out = capsys.readouterr().out
    every = _rows(out)
    assert len(front) == int(small_frame.pareto.sum()) and len(every) == len(small_frame) > len(front)
    assert "rows off the Pareto front" not in out


def test_a_layout_crosses_nodes_exactly_when_one_replicas_group_outgrows_a_node(small_frame):
    """With one device per node, tp=2 spans two nodes and two replicas of tp=1 do not."""
    tp = small_frame.tp.to_numpy(float)
    assert list(small_frame.crosses_nodes) == list(tp * small_frame.ep.to_numpy(float) > 1)
    assert small_frame.crosses_nodes.any() and not small_frame.crosses_nodes.all()


def test_the_chosen_row_is_the_front_row_with_most_goodput_per_device_or_the_cheapest_when_priced(small_frame):
    from perfmodel import launch

    t = {c: small_frame[c].to_numpy() for c in small_frame.columns}
    i = launch.chosen(t)
    front = small_frame[small_frame.pareto & small_frame.goodput_per_device.notna()]
    assert small_frame.goodput_per_device[i] == front.goodput_per_device.max()
    t["cost_per_million_tokens"] = np.where(np.arange(len(small_frame)) == i, 9.0, 1.0)
    t["pareto"] = np.ones(len(small_frame), bool)
    assert launch.chosen(t) != i  # priced: the cheapest, not the most goodput per device


@pytest.mark.parametrize("engine,first", [("vllm", "vllm serve meta-llama/Llama-3.2-1B"),
                                          ("sglang", "python -m sglang.launch_server --model-path meta-llama/Llama-3.2-1B"),
                                          ("trtllm", "trtllm-serve meta-llama/Llama-3.2-1B")])
def test_capacity_prints_the_launch_command_of_the_chosen_row_for_each_engine(engine, first, capsys, small_frame):
    assert main(["capacity", *SMALL, *NODE_SETS, "--engine", engine]) == 0
    out = capsys.readouterr().out
    assert f"# launch settings ({engine})" in out
    cmd = next(ln for ln in out.splitlines() if ln.startswith(first.split()[0]) and "meta-llama" in ln)
    assert cmd.startswith(first)
    api = pm.launch_settings(small_frame, engine=engine)
    i = int(api.row[0])
    assert int(small_frame.replicas[i]) == int(api.instances[0])
    assert api.command[0].endswith(cmd.split("meta-llama/Llama-3.2-1B", 1)[1]) or engine == "trtllm"


def test_the_profile_names_the_engine_of_the_launch_settings(capsys):
    argv = ["capacity", "-m", "llama-3.2-1b", "-H", "h100-sxm", "--tp", "1", "--prompt-len", "uniform:32,128",
            "--output-len", "lognormal:median=16,max=64", "--requests", "400", "--seeds", "1", "--workers", "1",
            "--mode", "achievable", "--impl", "sglang-0.5"]
    assert main(argv) == 0
    assert "# launch settings (sglang)" in capsys.readouterr().out


@pytest.mark.parametrize("argv,opt", [(["--engine", "tgi"], "--engine"), (["--memory-fraction", "1.5"], "--memory-fraction"),
                                      (["--memory-fraction", "x"], "--memory-fraction")])
def test_bad_launch_options_are_one_line_naming_the_option(argv, opt, capsys):
    assert main(["capacity", *SMALL, *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and opt in err[0], err


def test_json_output_keeps_every_row_and_carries_crosses_nodes(capsys, small_frame):
    assert main(["capacity", *SMALL, *NODE_SETS, "--format", "json", "--all"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == len(small_frame) and all("crosses_nodes" in r for r in rows)


def test_plan_prints_the_pareto_front_unless_all(capsys):
    argv = ["plan", "-m", "llama-3.1-70b", "-H", "h100-sxm", "--gpus", "16"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    front = _rows(out)
    assert main(argv + ["--all"]) == 0
    every = _rows(capsys.readouterr().out)
    df = pm.plan("llama-3.1-70b", "h100-sxm", gpus=16)
    assert len(front) == int(df.pareto.sum()) < len(every) == len(df)
    assert "crosses_nodes" in out.splitlines()[0] and "true" in out and f"{len(df) - len(front)} rows off" in out


def test_a_frame_that_is_not_a_capacity_result_is_refused():
    with pytest.raises(pm.SpecError, match="capacity_frame"):
        pm.launch_settings(pm.decode("llama-3.2-1b", "l4"))
