"""Launch settings of a capacity row (perfmodel/launch.py, docs/launch.md): each engine's flags carry the row."""
import math
import shlex
import warnings

import pytest
import yaml

import perfmodel as pm
from perfmodel import launch
from perfmodel.errors import SpecError
from perfmodel.specs import catalog_names, load_impl

ROW = dict(model_id="meta-llama/Llama-3.1-70B", serving="colocated", tp=8, ep=1, replicas=2, max_num_seqs=256,
           max_num_batched_tokens=2048, kv_dtype="bf16", weights_dtype="bf16", memory_fraction=0.9)
MOE = dict(ROW, model_id="deepseek-ai/DeepSeek-R1", tp=1, ep=8, replicas=1)
DISAGG = dict(ROW, serving="disaggregated", tp=None, ep=None, replicas=None, prefill_tp=2, prefill_instances=2,
              decode_tp=4, decode_instances=1)


def flags(command: str) -> dict:
    """The last line of a command (the engine's own, after any YAML heredoc) as {flag: value or True}."""
    toks = shlex.split(command.splitlines()[-1])
    out, i = {}, 0
    while i < len(toks):
        if toks[i].startswith("--"):
            nxt = toks[i + 1] if i + 1 < len(toks) else None
            val = nxt if nxt is not None and not (nxt.startswith("--")) else True
            out[toks[i]] = val
            i += 1 if val is True else 2
        else:
            i += 1
    return out


def heredoc(command: str) -> dict:
    """The YAML a TensorRT-LLM command writes before it starts the server."""
    body = command.split("<<'EOF'\n", 1)[1].split("\nEOF\n", 1)[0]
    return yaml.safe_load(body)


@pytest.mark.parametrize("engine,flag", [("vllm", "--tensor-parallel-size"), ("sglang", "--tp-size"),
                                         ("trtllm", "--tp_size")])
def test_each_engines_command_carries_the_tensor_parallel_size_of_the_row(engine, flag):
    (pool,) = launch.settings(engine, **ROW)
    assert flags(pool["command"])[flag] == "8" and pool["args"][flag] == 8
    assert pool["instances"] == 2 and pool["gpus_per_instance"] == 8


def test_vllms_command_starts_vllm_serve_on_the_models_repo_and_parses_back_to_its_args():
    (pool,) = launch.settings("vllm", **ROW)
    assert pool["command"].startswith("vllm serve meta-llama/Llama-3.1-70B ")
    assert flags(pool["command"]) == {k: v if v is True else str(v) for k, v in pool["args"].items()}
    assert pool["args"]["--max-num-seqs"] == 256 and pool["args"]["--max-num-batched-tokens"] == 2048
    assert pool["args"]["--gpu-memory-utilization"] == "0.9"


@pytest.mark.parametrize("kv,want", [("fp8", ("fp8", "fp8_e4m3", "fp8")), ("bf16", ("auto", "auto", "auto")),
                                     (None, ("auto", "auto", "auto"))])
def test_a_kv_format_maps_to_each_engines_cache_dtype(kv, want):
    got = []
    for engine in launch.ENGINES:
        (pool,) = launch.settings(engine, **dict(ROW, kv_dtype=kv))
        got.append(heredoc(pool["command"])["kv_cache_config"]["dtype"] if engine == "trtllm"
                   else pool["args"]["--kv-cache-dtype"])
    assert tuple(got) == want


def test_an_e5m2_cache_is_refused_where_the_engine_has_none_and_kept_where_it_has_one():
    assert launch.settings("vllm", **dict(ROW, kv_dtype="fp8-e5m2"))[0]["args"]["--kv-cache-dtype"] == "fp8_e5m2"
    with pytest.raises(SpecError, match="^--kv-dtype: trtllm has no 'fp8-e5m2' KV cache: choose .*fp8") as e:
        launch.settings("trtllm", **dict(ROW, kv_dtype="fp8-e5m2"))
    assert "\n" not in str(e.value)


def test_a_disaggregated_row_gives_one_prefill_and_one_decode_pool_whose_gpus_add_up_to_the_rows_devices():
    for engine in launch.ENGINES:
        pools = launch.settings(engine, **DISAGG)
        assert [p["pool"] for p in pools] == ["prefill", "decode"]
        assert sum(p["instances"] * p["gpus_per_instance"] for p in pools) == 2 * 2 + 1 * 4
        assert pools[0]["router"] and pools[0]["router"] == pools[1]["router"]


def test_each_pool_of_a_disaggregated_row_carries_its_engines_disaggregation_role():
    vl = launch.settings("vllm", **DISAGG)
    assert ['"kv_role":"kv_producer"' in p["args"]["--kv-transfer-config"] for p in vl] == [True, False]
    assert all('"kv_connector":"NixlConnector"' in p["args"]["--kv-transfer-config"] for p in vl)
    sg = launch.settings("sglang", **DISAGG)
    assert [p["args"]["--disaggregation-mode"] for p in sg] == ["prefill", "decode"]
    assert sg[0]["router"].count("--prefill http://") == 2 and sg[0]["router"].count("--decode http://") == 1
    tr = launch.settings("trtllm", **DISAGG)
    assert [heredoc(p["command"]).get("disable_overlap_scheduler", False) for p in tr] == [True, False]
    assert all(heredoc(p["command"])["cache_transceiver_config"] for p in tr)
    router = heredoc(tr[0]["router"] + "\n")
    assert router["context_servers"]["num_instances"] == 2 and len(router["context_servers"]["urls"]) == 2
    assert router["generation_servers"]["num_instances"] == 1 and tr[0]["router"].endswith("-c disagg_config.yaml")


def test_an_expert_parallel_row_runs_attention_data_parallel_over_its_ep_groups_in_each_engine():
    (vl,) = launch.settings("vllm", **MOE)
    assert vl["args"]["--data-parallel-size"] == 8 and vl["args"]["--enable-expert-parallel"] is True
    assert vl["args"]["--max-num-seqs"] == 256 // 8 and vl["args"]["--max-num-batched-tokens"] == 2048 // 8
    (sg,) = launch.settings("sglang", **MOE)
    assert (sg["args"]["--tp-size"], sg["args"]["--dp-size"], sg["args"]["--ep-size"]) == (8, 8, 8)
    assert sg["args"]["--enable-dp-attention"] is True and sg["args"]["--max-running-requests"] == 256
    (tr,) = launch.settings("trtllm", **MOE)
    assert (tr["args"]["--tp_size"], tr["args"]["--ep_size"]) == (8, 8) and tr["config"]["enable_attention_dp"] is True
    assert vl["gpus_per_instance"] == sg["gpus_per_instance"] == tr["gpus_per_instance"] == 8


def test_vllms_per_rank_limits_round_up_so_the_ranks_together_hold_the_rows_slots():
    (p,) = launch.settings("vllm", **dict(MOE, max_num_seqs=100, max_num_batched_tokens=1000))
    assert p["args"]["--max-num-seqs"] == math.ceil(100 / 8) and p["args"]["--max-num-seqs"] * 8 >= 100
    assert p["args"]["--max-num-batched-tokens"] == math.ceil(1000 / 8)


def test_no_token_budget_leaves_the_budget_flag_out_or_disables_chunking_and_says_so():
    row = dict(ROW, max_num_batched_tokens=None)
    (vl,) = launch.settings("vllm", **row)
    assert "--max-num-batched-tokens" not in vl["args"] and "--enable-chunked-prefill" not in vl["args"]
    (tr,) = launch.settings("trtllm", **row)
    assert "--max_num_tokens" not in tr["args"]
    (sg,) = launch.settings("sglang", **row)
    assert sg["args"]["--chunked-prefill-size"] == -1
    assert all(any("no token budget" in n for n in p["notes"]) for p in (vl, tr, sg))


def test_fp8_weights_quantize_online_in_vllm_and_sglang_and_ask_trtllm_for_an_fp8_checkpoint():
    row = dict(ROW, weights_dtype="fp8")
    assert [launch.settings(e, **row)[0]["args"].get("--quantization") for e in launch.ENGINES] == ["fp8", "fp8", None]
    assert any("FP8 checkpoint" in n for n in launch.settings("trtllm", **row)[0]["notes"])
    assert all("--quantization" not in launch.settings(e, **ROW)[0]["args"] for e in launch.ENGINES)


def test_trtllms_memory_fraction_is_of_the_memory_left_after_the_weights():
    (p,) = launch.settings("trtllm", **dict(ROW, memory_fraction=0.9), weights_fraction=0.4)
    want = (0.9 - 0.4) / (1 - 0.4)
    got = float(p["args"]["--kv_cache_free_gpu_memory_fraction"])
    assert want - 1e-3 <= got <= want and heredoc(p["command"])["kv_cache_config"]["free_gpu_memory_fraction"] == got
    (plain,) = launch.settings("trtllm", **ROW)
    assert plain["args"]["--kv_cache_free_gpu_memory_fraction"] == "0.9" and any("weights_fraction" in n
                                                                                  for n in plain["notes"])
    with pytest.raises(SpecError, match="^--memory-fraction: the colocated weights"):
        launch.settings("trtllm", **ROW, weights_fraction=0.95)


def test_vllm_and_sglang_take_the_rows_memory_fraction_as_it_is():
    row = dict(ROW, memory_fraction=0.85)
    assert launch.settings("vllm", **row)[0]["args"]["--gpu-memory-utilization"] == "0.85"
    assert launch.settings("sglang", **row)[0]["args"]["--mem-fraction-static"] == "0.85"


@pytest.mark.parametrize("bad", [0, -0.1, 1.5, True, "0.9", None, float("nan")])
def test_a_memory_fraction_outside_zero_to_one_is_one_spec_error_naming_the_option(bad):
    with pytest.raises(SpecError, match=r"^--memory-fraction: must be a fraction in \(0, 1\]") as e:
        launch.settings("vllm", **dict(ROW, memory_fraction=bad))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("text,want", [("vllm 0.24.0", "vllm"), ("sglang 0.5.14", "sglang"),
                                       ("trtllm 1.3.0rc20", "trtllm"), ("tensorrt-llm 1.3", "trtllm"),
                                       ("TensorRT-LLM", "trtllm"), ("vllm-0.24", "vllm"), (None, "vllm"), ("", "vllm")])
def test_engine_of_reads_an_implementation_profiles_engine(text, want):
    assert launch.engine_of(text) == want


def test_every_catalog_implementation_profile_names_an_engine_launch_knows():
    """The measured profiles name their engine ('vllm 0.24.0', ...); the others name none and get vLLM's."""
    names = catalog_names("impl")
    assert {"vllm-0.24", "sglang-0.5", "trtllm-1.3"} <= set(names)
    for name in names:
        engine = load_impl(name).engine
        want = name.split("-")[0] if engine else "vllm"
        assert launch.engine_of(engine) == want, (name, engine)


@pytest.mark.parametrize("bad", ["tgi", "llama.cpp 0.1", "ollama"])
def test_a_bad_engine_name_is_one_spec_error_naming_engine(bad):
    with pytest.raises(SpecError, match="^--engine: unknown engine .*: choose vllm, sglang or trtllm") as e:
        launch.settings(bad, **ROW)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("field,bad", [("tp", 0), ("replicas", 1.5), ("max_num_seqs", "256"),
                                       ("max_num_batched_tokens", -1)])
def test_a_layout_or_limit_that_is_not_a_whole_number_is_refused(field, bad):
    with pytest.raises(SpecError, match="must be a whole number"):
        launch.settings("vllm", **dict(ROW, **{field: bad}))


def test_model_id_reads_the_hf_repo_from_the_source_url():
    assert launch.model_id(pm.load_model("llama-3.1-70b")) == "meta-llama/Llama-3.1-70B"
    assert launch.model_id(pm.load_model("deepseek-r1")) == "deepseek-ai/DeepSeek-R1"
    assert launch.model_id(pm.load_model("glm-5")) == "zai-org/GLM-5"  # 'config.json of zai-org/GLM-5 (...)'
    assert launch.model_id(pm.load_model("gpt-3-175b")) == "gpt-3-175b"  # a paper, not a repo: its name


def test_format_settings_heads_the_commands_with_the_engine_and_ends_a_disaggregated_row_with_its_router():
    text = launch.format_settings(launch.settings("vllm", **ROW))
    lines = text.splitlines()
    assert lines[0].startswith("# launch settings (vllm): colocated, 2 instances x 8 GPUs")
    assert lines[-1].startswith("vllm serve ")
    pools = launch.settings("sglang", **DISAGG)
    text = launch.format_settings(pools)
    assert text.startswith("# launch settings (sglang): disaggregated")
    assert all(p["command"] in text for p in pools) and text.endswith(pools[0]["router"])
    assert launch.format_settings([]) == ""


def test_a_real_disaggregated_capacity_row_launches_on_exactly_its_devices():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = pm.capacity("llama-3.1-8b", "h100-sxm", gpus=2, disaggregate=True, seeds=1, requests=200,
                         prompt_len=512, output_len=64)
    rows = df[df.serving == "disaggregated"]
    assert len(rows) == 1
    row = rows.iloc[0]
    pools = launch.settings(None, model_id=launch.model_id(pm.load_model("llama-3.1-8b")), serving="disaggregated",
                            tp=None, ep=None, replicas=None, prefill_tp=row.prefill_tp,
                            prefill_instances=row.prefill_instances, decode_tp=row.decode_tp,
                            decode_instances=row.decode_instances, max_num_seqs=256, max_num_batched_tokens=2048,
                            kv_dtype="bf16", weights_dtype="bf16", memory_fraction=1.0)
    assert sum(p["instances"] * p["gpus_per_instance"] for p in pools) == row.devices == 2
    assert all(p["command"].startswith("vllm serve meta-llama/Llama-3.1-8B") for p in pools)


def test_the_examples_in_docs_launch_md_are_the_modules_current_output():
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "launch.md").read_text()
    blocks = [b.split("```", 1)[0].strip() for b in text.split("```text\n")[1:]]
    mid = launch.model_id(pm.load_model("llama-3.1-70b"))
    colocated = launch.settings(launch.engine_of("vllm 0.24.0"), model_id=mid, serving="colocated", tp=8, ep=1,
                                replicas=1, max_num_seqs=256, max_num_batched_tokens=2048, kv_dtype="fp8",
                                weights_dtype="bf16", memory_fraction=0.9)
    disagg = launch.settings("sglang 0.5.14", **dict(DISAGG, model_id=mid, kv_dtype="fp8"))
    assert blocks == [launch.format_settings(colocated), launch.format_settings(disagg)]
