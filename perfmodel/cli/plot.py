"""`perfmodel plot KIND -o FILE`: one call into perfmodel.plots."""
from __future__ import annotations

import sys
from typing import List, Optional

import typer

from .. import api
from ..errors import SpecError
from .common import (Impl, ADtype, app, KVDtype, Sets, WDtype, _ints, _sets)

# the options each kind draws from (the dtype and --set options go with every kind that loads a model)
USES = {
    "roofline": {"-m", "-H", "--batch", "--context", "--tp", "--pp", "--ep", "--mode", "--impl"},
    "latency-throughput": {"-m", "-H", "--batch", "--context", "--tp", "--pp", "--ep", "--mode", "--impl"},
    "memory": {"-m", "-H", "--batch", "--context", "--axis", "--tp", "--pp", "--ep"},
    "kv": {"-m", "-H", "--context", "--tp", "--pp", "--ep"},
    "speculative": {"-m", "-H", "--batch", "--context", "--alpha", "--gamma", "--draft-cost", "--mode", "--impl"},
    "serving": {"-m", "-H", "--tp", "--pp", "--ep", "--mode", "--impl"},
    "validation": {"-H", "--results"},
    "published": {"--cases"},
    "capacity": {"-m", "-H", "--gpus", "--tp", "--ep", "--mode", "--impl", "--prompt-len", "--output-len", "--slo-ttft",
                 "--slo-tpot", "--percentile", "--disaggregate", "--requests", "--seeds", "--max-tokens"},
}
WHY = {  # why an option does not go with a kind
    "kv": "the kv plot is per sequence, with no time or batch",
    "speculative": "the speculative what-if prices one device per panel",
    "serving": "the serving simulator chooses the batch each iteration",
    "validation": "the validation plot draws a measured run (-H: the spec to predict with)",
    "published": "the published plot draws perfmodel's published measurements (--cases: a file of your own)",
    "memory": "the memory plot shows sizes, no modelled time",
    "capacity": "the capacity plot searches the goodput of layouts under SLOs (the options of `perfmodel capacity`)",
}
CAPACITY_ONLY = ("--gpus", "--prompt-len", "--output-len", "--slo-ttft", "--slo-tpot", "--percentile", "--disaggregate",
                 "--requests", "--seeds", "--max-tokens")


@app.command()
def plot(kind: str = typer.Argument(..., help="roofline, latency-throughput, memory, kv, speculative, serving, validation, "
                                               "published or capacity"),
         out: str = typer.Option(..., "-o", "--out", metavar="<file>", help="FILE.png, FILE.svg or FILE.pdf"),
         model: Optional[str] = typer.Option(None, "-m", "--model", metavar="<name list>", help="Model(s), comma list: one series per model (speculative: DRAFT,TARGET)."),
         hardware: Optional[str] = typer.Option(None, "-H", "--hardware", metavar="<name list>", help="Hardware, comma list: one series per device (default h100-sxm; kv: capacity lines; validation: the spec to predict with)."),
         batch: Optional[str] = typer.Option(None, "--batch", metavar="<int list>", help="Batch sizes B: concurrent sequences per replica (comma list)."),
         context: Optional[str] = typer.Option(None, "--context", metavar="<int list>", help="Context S in tokens (comma list where the plot has a context axis)."),
         tp: Optional[str] = typer.Option(None, "--tp", metavar="<int>", help="Tensor-parallel devices per replica, comma list: one series per layout."),
         pp: Optional[str] = typer.Option(None, "--pp", metavar="<int>", help="Pipeline stages per replica, comma list."),
         ep: Optional[str] = typer.Option(None, "--ep", metavar="<int>", help="Expert-parallel device groups per replica (MoE), comma list."),
         axis: Optional[str] = typer.Option(None, "--axis", metavar="<batch|context>", help="memory: stack against batch (default) or context."),
         alpha: Optional[str] = typer.Option(None, "--alpha", metavar="<number list>", help="speculative: acceptance rates (comma list)."),
         gamma: Optional[str] = typer.Option(None, "--gamma", metavar="<int list>", help="speculative: draft lengths (comma list)."),
         draft_cost: Optional[float] = typer.Option(None, "--draft-cost", metavar="<number list>", help="speculative, closed form: draft step / target step (default 0.1)."),
         results: Optional[str] = typer.Option(None, "--results", metavar="<folder>", help="validation: a measurement results folder."),
         weights_dtype: str = WDtype, kv_dtype: Optional[str] = KVDtype, act_dtype: str = ADtype,
         sets: Optional[List[str]] = Sets,
         mode: str = typer.Option("roofline", "--mode", metavar="<mode>", help="roofline (the ideal bound) or achievable (an estimate): the "
                                  "op times of roofline and latency-throughput (also simple), the step cost of serving "
                                  "and speculative with models."),
         impl: Optional[str] = Impl,
         cases: Optional[str] = typer.Option(None, "--cases", metavar="<file>", help="published: a measurements YAML (default: perfmodel's)."),
         gpus: Optional[str] = typer.Option(None, "--gpus", metavar="<int>", help="capacity: every layout of N devices."),
         prompt_len: Optional[str] = typer.Option(None, "--prompt-len", metavar="<lengths>", help="capacity: prompt tokens (as in `perfmodel capacity`)."),
         output_len: Optional[str] = typer.Option(None, "--output-len", metavar="<lengths>", help="capacity: output tokens."),
         slo_ttft: Optional[str] = typer.Option(None, "--slo-ttft", metavar="<time>", help="capacity: TTFT SLO (default 1s)."),
         slo_tpot: Optional[str] = typer.Option(None, "--slo-tpot", metavar="<time>", help="capacity: TPOT SLO (default 50ms)."),
         percentile: Optional[str] = typer.Option(None, "--percentile", metavar="<number>", help="capacity: the SLOs' percentile (default 99)."),
         disaggregate: bool = typer.Option(False, "--disaggregate", help="capacity: also the checked prefill/decode splits."),
         requests: Optional[str] = typer.Option(None, "--requests", metavar="<int>", help="capacity: requests per simulated trace."),
         seeds: Optional[str] = typer.Option(None, "--seeds", metavar="<int>", help="capacity: seeds (default 3)."),
         max_tokens: Optional[str] = typer.Option(None, "--max-tokens", metavar="<int>", help="capacity: the searches' token limit.")):
    """Publication-ready figures (matplotlib, headless): one call into perfmodel.plots.

    Comma lists of models, hardware and --tp/--pp/--ep draw one series per (model, hardware,
    layout); every figure states its mode (roofline: the ideal bound; achievable: an estimate)."""
    from .. import plots

    if kind not in plots.KINDS:
        raise SpecError("plot", None, f"unknown kind {kind!r}; choose from {', '.join(plots.KINDS)}")
    if not out.lower().endswith((".png", ".svg", ".pdf")):
        raise SpecError("-o", None, f"write .png, .svg or .pdf, got {out!r}")
    given = {"-m": model, "-H": hardware, "--batch": batch, "--context": context, "--tp": tp, "--pp": pp, "--ep": ep,
             "--axis": axis, "--alpha": alpha, "--gamma": gamma, "--draft-cost": draft_cost, "--results": results,
             "--cases": cases, "--impl": impl, "--mode": None if mode == "roofline" else mode, "--gpus": gpus,
             "--prompt-len": prompt_len, "--output-len": output_len, "--slo-ttft": slo_ttft, "--slo-tpot": slo_tpot,
             "--percentile": percentile, "--disaggregate": disaggregate or None, "--requests": requests,
             "--seeds": seeds, "--max-tokens": max_tokens}
    for opt, v in given.items():
        if v is not None and opt not in USES[kind]:
            why = WHY.get(kind, f"the {kind} plot does not use it")
            if opt in CAPACITY_ONLY:
                why = "it is an option of the capacity plot"
            elif opt in ("--mode", "--impl"):
                why = (f"the {kind} plot shows no modelled time; --mode and --impl go with roofline, latency-throughput, "
                       "serving and speculative with -m DRAFT,TARGET")
            raise SpecError(opt, None, f"does not go with `plot {kind}`: {why}")
    kw: dict = {}
    if batch:
        kw["batch"] = _ints(batch, "--batch")
    if context:
        kw["context"] = _ints(context, "--context")
    lay = {k: v for k, v in (("tp", tp), ("pp", pp), ("ep", ep)) if v is not None}
    fmts = dict(weights_dtype=weights_dtype, kv_dtype=kv_dtype, act_dtype=act_dtype, sets=_sets(sets))
    timed = dict(mode=mode, impl=impl)
    hw = hardware or api.DEFAULT_HARDWARE
    if kind == "roofline":
        fig = plots.roofline(model or api.DEFAULT_MODEL, hw, **kw, **fmts, **timed, **lay)
    elif kind == "latency-throughput":
        fig = plots.latency_throughput(model or "llama-2-13b,llama-2-13b-gqa8", hw, **kw, **fmts, **timed, **lay)
    elif kind == "memory":
        if (axis or "batch") not in ("batch", "context"):
            raise SpecError("--axis", None, f"must be batch or context, got {axis!r}")
        fig = plots.memory(model or api.DEFAULT_MODEL, hw, axis=axis or "batch", **kw, **fmts, **lay)
    elif kind == "kv":
        kv_kw = {"context": kw["context"]} if "context" in kw else {}
        fig = plots.kv(model or plots.kv.__defaults__[0], kv_dtype=kv_dtype or "bf16", sets=_sets(sets),
                       hardware=hardware, **kv_kw, **lay)
    elif kind == "speculative":
        from .. import whatif

        a = whatif._unit_interval(_ints(alpha, "--alpha"), "--alpha") if alpha else None
        g = _ints(gamma, "--gamma") if gamma else None
        if model is None:
            if hardware is not None or batch is not None or context is not None or mode != "roofline" or impl:
                raise SpecError("-H/--batch/--context/--mode", None, "go with -m DRAFT,TARGET (engine costs); the "
                                "closed form takes --alpha, --gamma and --draft-cost")
            fig = plots.speculative(a, g, 0.1 if draft_cost is None else draft_cost)
        else:
            names = api._required(model, "--model")
            if len(names) != 2:
                raise SpecError("--model", None, f"the speculative plot takes DRAFT,TARGET: two models, got {len(names)}")
            if draft_cost is not None:
                raise SpecError("--draft-cost", None, "with -m DRAFT,TARGET the engine prices the draft step")
            fig = plots.speculative(a, g, draft=names[0], target=names[1], hardware=hw,
                                    batch=kw.get("batch", [1]), context=kw.get("context", [1024]), **fmts, **timed)
    elif kind == "serving":
        fig = plots.serving(model or api.DEFAULT_MODEL, hw, **fmts, **timed, **lay)
    elif kind == "published":
        fig = plots.published(path=cases)
    elif kind == "capacity":
        from ..serving.capacity import DEFAULT_OUTPUT, DEFAULT_PROMPT

        fig = plots.capacity(model or "llama-3.1-70b", hw, gpus, tp, int(ep or 1), 1, prompt_len or DEFAULT_PROMPT,
                             output_len or DEFAULT_OUTPUT, slo_ttft or "1s", slo_tpot or "50ms", percentile or 99,
                             mode, impl, disaggregate, requests=requests, seeds=seeds or 3, sets=_sets(sets),
                             max_tokens=max_tokens, show=True)
    else:
        if not results:
            raise SpecError("--results", None, "the validation plot needs a results folder from `perfmodel measure`")
        fig = plots.validation(results, hardware)
    path = plots.save(fig, out)
    sys.stderr.write(f"wrote {path}\n")

