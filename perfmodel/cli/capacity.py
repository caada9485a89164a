"""`perfmodel capacity`: goodput under latency SLOs per layout and hardware (perfmodel.serving.capacity).

Importing this module registers the command on perfmodel.cli.app. Bad input is a SpecError: one line,
exit code 2.
"""
from __future__ import annotations

from typing import List, Optional

import typer

from .common import ADtype, Cluster, Fmt, Impl, KVDtype, Sets, WDtype, Workers, _fmt, _out, _sets, app, mode_note
from ..report import _human, _is_num, align, render

HUMAN = [("hardware", "hardware"), ("serving", "serving"), ("layout", "layout"), ("devices", "devices"),
         ("goodput_rps", "goodput/s"), ("goodput_range", "seeds min-max"), ("output_tok_s", "tokens/s"),
         ("goodput_per_device", "goodput/s/device"), ("cost_per_million_tokens", "$/M tokens"),
         ("binding", "binding"), ("ttft_s", "p99 TTFT"), ("tpot_s", "p99 TPOT"), ("crosses_nodes", "crosses nodes"),
         ("pareto", "pareto"), ("note", "note")]


def layout_text(t: dict, i: int) -> str:
    """tp=8, tp=2 x4 (replicas), tp=2 ep=4; disaggregated: prefill tp=4 x1 + decode tp=4 x1."""
    def one(tp, ep, n):
        s = f"tp={int(tp)}" + (f" ep={int(ep)}" if _is_num(ep) and ep == ep and ep > 1 else "")
        return s + (f" x{int(n)}" if n > 1 else "")

    if t["serving"][i] == "disaggregated":
        if not _is_num(t["prefill_tp"][i]) or t["prefill_tp"][i] != t["prefill_tp"][i]:
            return "-"
        return (f"prefill tp={int(t['prefill_tp'][i])} x{int(t['prefill_instances'][i])} + decode "
                f"tp={int(t['decode_tp'][i])} x{int(t['decode_instances'][i])}")
    return one(t["tp"][i], t["ep"][i], t["replicas"][i])


def _cell(col: str, v, t: dict, i: int) -> str:
    if col == "goodput_range":
        lo, hi = t["goodput_lo_rps"][i], t["goodput_hi_rps"][i]
        return "-" if lo != lo else f"{lo:.4g}-{hi:.4g}"
    if col in ("goodput_rps", "goodput_per_device", "output_tok_s") and _is_num(v) and v == v:
        return f"{v:,.0f}" if v >= 10_000 else f"{v:.4g}"
    if col == "cost_per_million_tokens" and _is_num(v) and v == v:
        return f"{v:.3g}"
    return _human(col, v)


def _render(t: dict, fmt: str, columns: list, q: float = 99.0) -> str:
    if fmt != "table":
        return render(t, fmt, columns)
    cols = [(c, h.replace("p99", f"p{q:g}")) for c, h in HUMAN if c in t or c == "goodput_range"]
    if all(x != x for x in t["cost_per_million_tokens"]):
        cols = [(c, h) for c, h in cols if c != "cost_per_million_tokens"]
    if not any(t["note"]):
        cols = [(c, h) for c, h in cols if c != "note"]
    n = len(t["hardware"])
    cells = [[h for _, h in cols]] + [[_cell(c, t.get(c, [None] * n)[i], t, i) for c, _ in cols] for i in range(n)]
    right = [c not in ("hardware", "serving", "layout", "binding", "note", "pareto", "crosses_nodes") for c, _ in cols]
    return align(cells, right)


def footer(summary: dict) -> list[str]:
    q = f"p{summary['percentile']:g}"
    seeds = summary["seeds"]
    budget = summary["token_budget"]
    lines = [f"goodput: the largest Poisson arrival rate (requests/s, all replicas) at which {q} TTFT <= "
             f"{_human('x_s', summary['slo_ttft_s'])} and {q} TPOT <= {_human('x_s', summary['slo_tpot_s'])} over "
             "each trace's requests after its first sixth and before its last (warm-up, cool-down); bisection to "
             f"{100 * summary['tolerance']:g}%, " + (f"the median over seeds {','.join(str(s) for s in seeds)} (seeds "
             "min-max: each seed's own)" if len(seeds) > 1 else f"seed {seeds[0]}"),
             f"server: continuous batching, {'chunked prefill of ' + str(budget) + ' tokens per step' if budget else 'whole prompts join'}, "
             f"at most {summary['slots'] if summary['slots'] is not None else 'unlimited'} sequences, paged KV; "
             f"prompts {summary['prompt_len']}, outputs {summary['output_len']} (mean {summary['mean_output_tokens']:.0f})",
             "binding: the SLO broken just above the goodput (memory: TTFT, while the KV cache stops admission); "
             "TTFT and TPOT: at the goodput; pareto: no other row has more goodput per device and "
             + ("a lower cost per million output tokens" if summary["pareto_on"] == "cost" else
                "fewer devices (with --price: a lower cost per million output tokens)")]
    if summary.get("concurrency"):
        n = summary["concurrency"]
        lines[0] = (f"goodput: the request rate (requests/s, all replicas) that {n} clients in a closed loop get (each "
                    f"sends its next request when its last returns), where {q} TTFT <= "
                    f"{_human('x_s', summary['slo_ttft_s'])} and {q} TPOT <= {_human('x_s', summary['slo_tpot_s'])} "
                    f"over the requests after a warm-up of 2 per client and before the last one per client; "
                    + (f"the median seed of {','.join(str(s) for s in seeds)}" if len(seeds) > 1 else f"seed {seeds[0]}"))
        lines[2] = ("binding: the SLO those clients break (none: both met); TTFT and TPOT: their percentiles at that "
                    "concurrency; pareto: no other row has more goodput per device and "
                    + ("a lower cost per million output tokens" if summary["pareto_on"] == "cost" else "fewer devices"))
    lines += summary.get("disaggregation", [])
    if summary.get("pipeline_layouts_left_out"):
        lines.append(f"{summary['pipeline_layouts_left_out']} pipeline layouts left out: the serving simulator does "
                     "not model pipeline stages")
    return ["# " + x for x in lines]


@app.command("capacity")
def capacity(model: str = typer.Option("llama-3.1-70b", "-m", "--model", metavar="<name>",
                                       help="Model catalog name or YAML path (one)."),
             hardware: str = typer.Option("h100-sxm", "-H", "--hardware", metavar="<name list>",
                                          help="Hardware catalog names or YAML paths (comma list: one search each)."),
             gpus: Optional[str] = typer.Option(None, "--gpus", metavar="<int>",
                                                help="Devices: search every layout of N (no pipeline stages)."),
             tp: Optional[int] = typer.Option(None, "--tp", metavar="<int>", help="One layout: tensor-parallel devices per replica."),
             pp: int = typer.Option(1, "--pp", metavar="<int>", help="Pipeline stages (only 1: the simulator does not model stages)."),
             ep: int = typer.Option(1, "--ep", metavar="<int>", help="Expert-parallel device groups per replica (MoE)."),
             replicas: int = typer.Option(1, "--replicas", metavar="<int>", help="Replicas of the layout (random balancing)."),
             prompt_len: str = typer.Option("lognormal:median=1000,max=8000", "--prompt-len", metavar="<lengths>",
                                            help="Prompt tokens: N, uniform:LO,HI or lognormal:median=M,max=C[,sigma=S]."),
             output_len: str = typer.Option("lognormal:median=250,max=2000", "--output-len", metavar="<lengths>",
                                            help="Output tokens, same forms as --prompt-len."),
             slo_ttft: str = typer.Option("1s", "--slo-ttft", metavar="<time>", help="Time-to-first-token SLO, e.g. 1s, 500ms."),
             slo_tpot: str = typer.Option("50ms", "--slo-tpot", metavar="<time>", help="Time-per-output-token SLO, e.g. 50ms."),
             percentile: str = typer.Option("99", "--percentile", metavar="<number>", help="The percentile both SLOs hold at, in (0, 100]."),
             mode: str = typer.Option("roofline", "--mode", metavar="<mode>", help="Step cost: roofline (the ideal bound) or achievable."),
             impl: Optional[str] = Impl,
             disaggregate: bool = typer.Option(False, "--disaggregate", help="Also search prefill/decode pool splits of the devices."),
             price: Optional[str] = typer.Option(None, "--price", metavar="<USD/h list>",
                                                 help="USD per device-hour, one per hardware (e.g. 2.49/h,3.5/h): adds $/M output tokens."),
             slots: str = typer.Option("256", "--slots", metavar="<int|none>", help="Most concurrent sequences per replica (vLLM's max_num_seqs)."),
             token_budget: str = typer.Option("2048", "--token-budget", metavar="<int|none>",
                                              help="Tokens per step (chunked prefill; the prefill pool's batch); none: whole prompts."),
             requests: Optional[str] = typer.Option(None, "--requests", metavar="<int>",
                                                    help="Requests per simulated trace (default: six times the batch at saturation)."),
             seeds: str = typer.Option("3", "--seeds", metavar="<int>", help="Seeds: independent searches, median reported."),
             seed: int = typer.Option(0, "--seed", metavar="<int>", help="First seed."),
             tolerance: str = typer.Option("0.05", "--tolerance", metavar="<number>", help="Bisection stops at hi / lo <= 1 + this."),
             block_size: str = typer.Option("16", "--block-size", metavar="<int>", help="Paged KV block, tokens."),
             cost_quantum: str = typer.Option("16", "--cost-quantum", metavar="<int>",
                                              help="Decode contexts rounded up to this many tokens in the step cost (1: exact)."),
             weights_dtype: str = WDtype, kv_dtype: Optional[str] = KVDtype, act_dtype: str = ADtype,
             sets: Optional[List[str]] = Sets, fmt: str = Fmt,
             max_tokens: Optional[str] = typer.Option(None, "--max-tokens", metavar="<int>",
                                                      help="Refuse searches estimated to simulate more generated tokens; "
                                                           "default 15,000,000 (about 30 s on one core here)."),
             concurrency: Optional[str] = typer.Option(None, "--concurrency", metavar="<int>",
                                                       help="Serve N clients in a closed loop instead of searching the rate: "
                                                            "does each layout meet the SLOs at N, and at what request rate."),
             workers: Optional[str] = Workers, cluster: Optional[str] = Cluster,
             show_all: bool = typer.Option(False, "--all", help="Print every row, not only the Pareto front."),
             engine: Optional[str] = typer.Option(None, "--engine", metavar="<vllm|sglang|trtllm>",
                                                  help="Engine of the launch settings printed for the chosen row "
                                                       "(default: the --impl profile's engine, else vllm)."),
             memory_fraction: str = typer.Option("0.9", "--memory-fraction", metavar="<number>",
                                                 help="The launch settings' share of device memory for weights + KV.")):
    """Goodput under latency SLOs: the largest request rate each layout and device serves within them."""
    fmt = _fmt(fmt)
    from ..serving import capacity as cap

    t, summary = cap.capacity(model, hardware, gpus, tp, pp, ep, replicas, prompt_len, output_len, slo_ttft, slo_tpot,
                              percentile, mode, impl, disaggregate, price, slots,
                              None if token_budget.strip().lower() == "none" else token_budget, requests, seeds, seed,
                              tolerance, block_size, cost_quantum, weights_dtype, kv_dtype, act_dtype, _sets(sets),
                              max_tokens, concurrency, workers=workers, cluster=cluster, show=fmt == "table")
    import numpy as np

    t["layout"] = np.asarray([layout_text(t, i) for i in range(len(t["hardware"]))], dtype=object)
    from .. import launch as ln

    got = ln.for_capacity(t, summary, engine, memory_fraction)
    launch = None
    if got is not None:
        i, pools = got
        launch = (f"# chosen row: {t['hardware'][i]} {t['layout'][i]} ({t['goodput_rps'][i]:.4g} requests/s); the "
                  "search gave weights + KV the whole device memory: at --memory-fraction "
                  f"{float(memory_fraction):g} the engine's KV pool is smaller (search with --set memory_capacity=... "
                  "to match)\n" + ln.format_settings(pools))
    hidden = 0
    if not show_all:  # the Pareto front, and rows that say why a layout has no goodput stay out with it
        keep = np.asarray(t["pareto"], dtype=bool)
        hidden = int((~keep).sum())
        if keep.any():
            t = {c: v[keep] for c, v in t.items()}
        else:
            hidden = 0
    _out(_render(t, fmt, cap.COLUMNS + ["layout"], summary["percentile"]))
    if fmt == "table":
        _out("\n".join(footer(summary)))
        if hidden:
            _out(f"# {hidden} rows off the Pareto front left out (--all prints every row)")
        _out(mode_note(mode, impl, hardware, _sets(sets)))
        if launch:
            _out(launch)


@app.command("fleet")
def fleet(path: str = typer.Argument(..., help="A fleet file: CSV with a header, or YAML (a list of rows): model, "
                                              "hardware, gpus or tp/ep/replicas, and optionally the workload and SLOs."),
          workers: Optional[str] = Workers, cluster: Optional[str] = Cluster,
          max_tokens: Optional[str] = typer.Option(None, "--max-tokens", metavar="<int>",
                                                   help="Refuse a fleet whose searches are estimated to simulate more "
                                                        "generated tokens in all; default 15,000,000."),
          show_all: bool = typer.Option(False, "--all", help="Print every row of every search, not only each fleet "
                                                             "row's chosen one."),
          out: Optional[str] = typer.Option(None, "-o", "--out", metavar="<file>",
                                            help="Also write every row as CSV (written whole or not at all)."),
          fmt: str = Fmt):
    """Capacity searches for a whole fleet: one per row of a YAML or CSV file, answered as one table."""
    fmt = _fmt(fmt)
    import numpy as np

    from ..serving import fleet as fl
    from ..fileio import check_writable, write_text

    if out:
        check_writable(out, "-o")
    t, summaries = fl.plan(path, workers, cluster, max_tokens, show=fmt == "table")
    t["layout"] = np.asarray([layout_text(t, i) for i in range(len(t["hardware"]))], dtype=object)
    cols = ["fleet_row", "name", "prompt_len", "output_len", "slo_ttft_s", "slo_tpot_s", "chosen"] + cap_columns() + \
        ["layout"]
    if out:
        write_text(out, render(t, "csv", cols), "-o")
    if not show_all:
        keep = np.asarray(t["chosen"], bool) | ~np.isin(t["fleet_row"], np.asarray(t["fleet_row"])[np.asarray(t["chosen"], bool)])
        t = {c: v[keep] for c, v in t.items()}
    if fmt != "table":
        _out(render(t, fmt, cols))
        return
    head = [("fleet_row", "row"), ("name", "name"), ("model", "model")] + [x for x in HUMAN if x[0] != "pareto"]
    n = len(t["hardware"])
    shown = [(c, h) for c, h in head if c in t or c == "goodput_range"]
    if all(x != x for x in t["cost_per_million_tokens"]):
        shown = [(c, h) for c, h in shown if c != "cost_per_million_tokens"]
    cells = [[h for _, h in shown]] + [[_cell(c, t.get(c, [None] * n)[i], t, i) if c not in ("fleet_row", "name", "model")
                                        else str(t[c][i]) for c, _ in shown] for i in range(n)]
    _out(align(cells, [c not in ("name", "model", "hardware", "serving", "layout", "binding", "note", "crosses_nodes")
                       for c, _ in shown]))
    _out(f"# {len(summaries)} fleet rows; each row: its chosen layout (the Pareto row with the most goodput per device, "
         "or the cheapest when priced), or why none has a goodput" + ("" if show_all else "; --all prints every row")
         + (f"; every row written to {out}" if out else ""))
    for mode, impl in dict.fromkeys((sm["mode"], sm.get("impl")) for sm in summaries):  # ideal bound or estimate
        _out(mode_note(mode, impl if isinstance(impl, str) else None))


def cap_columns() -> list:
    from ..serving import capacity as cap

    return list(cap.COLUMNS)


__all__ = ["capacity", "fleet"]
