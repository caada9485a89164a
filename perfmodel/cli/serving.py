"""`perfmodel serve-sim` and `perfmodel kv-memory`: the serving simulator (perfmodel.serving) at a shell.

Importing this module registers the two commands on perfmodel.cli.app. Bad input is a SpecError:
one line, exit code 2.
"""
from __future__ import annotations

from typing import List, Optional

import typer

from .. import api, serving
from .common import (EP, PP, TP, Energy, Impl, Price, ADtype, Fmt, KVDtype, Replicas, Sets, WDtype, _fmt, _out,
                     _sets, app, mode_note)
from ..report import _human, _is_num, align, render

Model = typer.Option(api.DEFAULT_MODEL, "-m", "--model", metavar="<name>", help="Model catalog name or YAML path.")
Hardware = typer.Option(api.DEFAULT_HARDWARE, "-H", "--hardware", metavar="<name>", help="Hardware catalog name or YAML path.")
Slots = typer.Option("8", "--slots", metavar="<int|none>", help="Batch slots (concurrent sequences); 'none': only KV memory limits.")
Requests = typer.Option(None, "--requests", metavar="<int>", help="Number of requests (default 64; with --trace, its rows).")
Rate = typer.Option(None, "--rate", metavar="<requests/s>", help="Poisson arrivals at R requests/s (default: all at t = 0).")
Trace = typer.Option(None, "--trace", metavar="<file>", help="CSV with columns arrival_s, prompt_tokens, output_tokens.")
PromptLen = typer.Option(serving.DEFAULT_PROMPT, "--prompt-len", metavar="<lengths>",
                         help="Prompt tokens: N, uniform:LO,HI or lognormal:median=M,max=C[,sigma=S].")
OutputLen = typer.Option(serving.DEFAULT_OUTPUT, "--output-len", metavar="<lengths>", help="Output tokens, same forms as --prompt-len.")
Block = typer.Option(16, "--block-size", metavar="<int>", help="Paged KV block, tokens.")
Prefix = typer.Option(0, "--shared-prefix", metavar="<int>", help="Tokens of a system prompt common to every request.")
Samples = typer.Option(1, "--samples", metavar="<int>", help="Parallel samples per prompt (n), sharing the prompt's blocks.")
Prefill = typer.Option(None, "--prefill", metavar="<chunked|separate|whole>",
                       help="chunked: prompt chunks ride in decode steps; separate: prefill-only steps; whole: whole "
                            "prompts ride in decode steps up to the first that does not fit. Default: the --impl "
                            "engine's own (TensorRT-LLM whole, SGLang separate), else chunked.")
Budget = typer.Option(None, "--token-budget", metavar="<int|none>", help="Tokens per step (chunked prefill); default: whole prompts (Orca).")
Seed = typer.Option(0, "--seed", metavar="<int>", help="Seed of the random arrivals and lengths.")
MaxTokens = typer.Option(None, "--max-tokens", metavar="<int>", help="Refuse to simulate more generated tokens than this, over all "
                         "runs (an iteration counts as 20 when few slots make iterations the cost); default 5,000,000 "
                         "(about 13 s here).")
Quantum = typer.Option(16, "--cost-quantum", metavar="<int>",
                       help="Decode contexts rounded up to this many tokens to cache step costs (1: exact).")

SIM_HUMAN = [("policy", "policy"), ("mode", "mode"), ("kv_manager", "KV"), ("prefill", "prefill"), ("requests", "requests"),
             ("tokens", "tokens"), ("makespan_s", "makespan"), ("throughput_tok_s", "tokens/s"),
             ("mean_latency_s", "mean latency"), ("p50_latency_s", "p50 latency"), ("p99_latency_s", "p99 latency"),
             ("mean_ttft_s", "mean TTFT"), ("p99_ttft_s", "p99 TTFT"), ("mean_tpot_s", "mean TPOT"),
             ("p99_tpot_s", "p99 TPOT"), ("peak_running", "peak seqs"), ("preemptions", "preempted")]
CLOSED_HUMAN = [("concurrency", "clients"), ("p90_ttft_s", "p90 TTFT"), ("p50_tpot_s", "p50 TPOT"),
                ("p90_tpot_s", "p90 TPOT"), ("p90_latency_s", "p90 E2E"), ("request_rate", "req/s"),
                ("mean_in_flight", "in flight"), ("throughput_per_device", "tokens/s/device"),
                ("tok_s_per_user", "tokens/s/user")]
Concurrency = typer.Option(None, "--concurrency", metavar="<int>",
                           help="A closed loop of N clients, each sending its next request when its last returns "
                                "(vLLM bench serve --max-concurrency, AIPerf --concurrency); default: open loop.")
Warmup = typer.Option(None, "--warmup", metavar="<int>",
                      help="Closed loop: requests run first and left out of the statistics (default 2 x concurrency).")
LAYOUT_HUMAN = [("tp", "tp"), ("ep", "ep"), ("replicas", "replicas")]
KV_HUMAN = [("manager", "manager"), ("mode", "mode"), ("block_size", "block"), ("peak_sequences", "peak seqs"),
            ("mean_sequences", "mean seqs"), ("mean_used_bytes", "used"), ("mean_reserved_bytes", "reserved"),
            ("utilization", "used/reserved"), ("mean_internal_bytes", "internal"), ("mean_future_bytes", "future"),
            ("mean_external_bytes", "external"), ("mean_saved_bytes", "saved"), ("preemptions", "preempted"),
            ("throughput_tok_s", "tokens/s")]


def _cell(col: str, v) -> str:
    if col in ("mean_running", "mean_sequences") and _is_num(v):
        return f"{v:.1f}"
    if col == "utilization" and _is_num(v):
        return f"{100 * v:.1f}%" if v == v else "-"  # NaN: nothing was held
    return _human(col, v)


def _render(table: dict, fmt: str, columns: list, human: list) -> str:
    """JSON/CSV in SI units (perfmodel.report), or an aligned table with these headers."""
    if fmt != "table":
        return render(table, fmt, columns)
    from ..report import _LAYOUT_HEAD, has_layout

    lay = has_layout(table)  # with tp, ep or replicas: the columns that are one replica's or every replica's say so
    cols = [(c, (_LAYOUT_HEAD.get(c, h) if lay else h)) for c, h in human if c in table]
    n = len(table[cols[0][0]])
    cells = [[h for _, h in cols]] + [[_cell(c, table[c][i]) for c, _ in cols] for i in range(n)]
    right = [all(_is_num(table[c][i]) for i in range(n)) for c, _ in cols]
    return align(cells, right)


def _budget(v: Optional[str]):
    return None if v is None or str(v).strip().lower() == "none" else v


def _unfit_note(what: str, reasons: list) -> str:
    return (f"# does not fit (a result, not an error: no request was served, so {what} - here, NaN in csv and json): "
            + "; ".join(dict.fromkeys(reasons)))


@app.command("serve-sim")
def serve_sim(model: str = Model, hardware: str = Hardware,
              policy: str = typer.Option("both", "--policy", metavar="<static|continuous|both>", help="static, continuous or both (same trace)."),
              requests: Optional[int] = Requests, slots: str = Slots, rate: Optional[float] = Rate,
              trace: Optional[str] = Trace, prompt_len: str = PromptLen, output_len: str = OutputLen,
              kv_manager: str = typer.Option("paged", "--kv-manager", metavar="<contiguous|paged>",
                                             help="contiguous (max-length reservation) or paged."),
              block_size: int = Block, shared_prefix: int = Prefix, samples: int = Samples,
              sharing: bool = typer.Option(True, "--sharing/--no-sharing", help="Paged: store shared prefixes once."),
              prefill: Optional[str] = Prefill, token_budget: Optional[str] = Budget, seed: int = Seed,
              cost_quantum: int = Quantum,
              timeline: Optional[str] = typer.Option(None, "--timeline", metavar="<file>",
                                                     help="Write every iteration to this CSV file."),
              weights_dtype: str = WDtype, kv_dtype: Optional[str] = KVDtype, act_dtype: str = ADtype,
              sets: Optional[List[str]] = Sets, fmt: str = Fmt, tp: int = TP, pp: int = PP, ep: int = EP,
              replicas: int = Replicas, price: Optional[str] = Price, energy: bool = Energy,
              mode: str = typer.Option("roofline", "--mode", metavar="<mode>", help="Step cost: roofline (the ideal bound) or achievable."),
              impl: Optional[str] = Impl, max_tokens: Optional[int] = MaxTokens,
              concurrency: Optional[str] = Concurrency, warmup: Optional[str] = Warmup):
    """Simulate serving: static vs continuous batching on the engine's step cost."""
    fmt = _fmt(fmt)
    runs = serving.serve_runs(model, hardware, policy, requests, slots, rate, trace,
                              prompt_len, output_len,
                              kv_manager, block_size, shared_prefix, samples, sharing, prefill, _budget(token_budget),
                              seed, weights_dtype, kv_dtype, act_dtype, _sets(sets), cost_quantum, tp, pp, ep,
                              replicas, price, energy, mode, impl, max_tokens, concurrency, warmup, show=fmt == "table")
    econ = [c for c in serving.ECONOMICS if c in runs[0].summary]
    extra = [c for c in ["impl"] + serving.CLOSED if c in runs[0].summary]
    unfit = [r.summary["does_not_fit"] for r in runs if r.summary.get("does_not_fit")]
    econ += ["does_not_fit"] if unfit else []
    table = serving._table([r.summary for r in runs], serving.SUMMARY + extra + econ)
    if timeline:
        from ..fileio import write_text

        write_text(timeline, render(serving.timeline(runs), "csv") + "\n", "--timeline")
    from ..report import has_layout

    human = SIM_HUMAN + (LAYOUT_HUMAN if has_layout(table) else []) + [(c, c.replace("_", " ")) for c in econ]
    if concurrency is not None:
        human = human[:4] + CLOSED_HUMAN[:1] + human[4:] + CLOSED_HUMAN[1:]
    _out(_render(table, fmt, serving.SUMMARY + extra + econ, human))
    if fmt == "table" and unfit:
        _out(_unfit_note("every time and rate is", unfit))
    if fmt == "table" and len(runs) == 2 and not unfit:
        s, c = (r.summary for r in runs)
        lat = s["mean_latency_s"] / c["mean_latency_s"]
        notes = [f"continuous vs static: {c['throughput_tok_s'] / s['throughput_tok_s']:.2f}x the throughput, "
                 + (f"{lat:.2f}x lower mean latency" if lat >= 1 else f"{1 / lat:.2f}x higher mean latency")]
        notes.append("static: padded batches that return when their longest member ends; "
                     "continuous: a finished sequence's slot is refilled at the next step")
        _out("\n".join("# " + n for n in notes))
    if fmt == "table":
        _out(mode_note(mode, impl, hardware, _sets(sets)))
        if concurrency is not None and not unfit:
            s = runs[-1].summary
            _out(f"# closed loop: {s['concurrency']:g} clients; {s.get('warmup', 0) * s['replicas']:g} warm-up requests "
                 f"left out; Little's law: {s['request_rate']:.4g} req/s x {s['mean_latency_s']:.4g} s mean E2E = "
                 f"{s['request_rate'] * s['mean_latency_s']:.4g} in flight (the clients, less the ramp and drain at "
                 "the window's ends)")


@app.command("kv-memory")
def kv_memory(model: str = Model, hardware: str = Hardware,
              requests: Optional[int] = typer.Option(None, "--requests", metavar="<int>", help="Number of requests (default 256)."),
              slots: str = typer.Option("none", "--slots", metavar="<int|none>", help="Batch slots; default none: KV memory is the limit."),
              rate: Optional[float] = Rate, trace: Optional[str] = Trace, prompt_len: str = PromptLen,
              output_len: str = OutputLen,
              block_size: str = typer.Option("16", "--block-size", metavar="<int>", help="Paged KV block(s), tokens (comma list)."),
              shared_prefix: int = Prefix, samples: int = Samples, prefill: Optional[str] = Prefill,
              token_budget: Optional[str] = Budget, seed: int = Seed, cost_quantum: int = Quantum,
              weights_dtype: str = WDtype, kv_dtype: Optional[str] = KVDtype, act_dtype: str = ADtype,
              sets: Optional[List[str]] = Sets, fmt: str = Fmt,
              mode: str = typer.Option("roofline", "--mode", metavar="<mode>", help="Step cost: roofline (the ideal bound) or achievable."),
              impl: Optional[str] = Impl, max_tokens: Optional[int] = MaxTokens):
    """KV memory under continuous batching: contiguous vs paged vs paged with prefix sharing."""
    fmt = _fmt(fmt)
    blocks = [b.strip() for b in str(block_size).split(",") if b.strip()]
    t = serving.kv_memory(model, hardware, requests, slots, rate, trace,
                          prompt_len, output_len,
                          blocks, shared_prefix, samples, prefill, _budget(token_budget), seed, weights_dtype,
                          kv_dtype, act_dtype, _sets(sets), cost_quantum, mode, impl, max_tokens)
    unfit = "does_not_fit" in t
    _out(_render(t, fmt, serving.KV_REPORT + [c for c in ["impl", "does_not_fit"] if c in t],
                 KV_HUMAN + [("does_not_fit", "does not fit")]))
    if fmt == "table" and unfit:
        _out(_unfit_note("the run's columns are", [x for x in t["does_not_fit"] if x]))
    if fmt == "table":
        cap = t["kv_capacity_bytes"][0]
        _out(f"# KV capacity {_human('kv_capacity_bytes', cap)} (device memory - weights); memory columns are means "
             f"over the run\n# internal: reserved but never filled; future: reserved for tokens not yet generated; "
             f"external: free, in holes too small for the next request")
        _out(mode_note(mode, impl, hardware, _sets(sets)))


__all__ = ["serve_sim", "kv_memory"]
