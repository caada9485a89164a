"""`perfmodel plot KIND -o FILE`: one call into perfmodel.plots."""
from __future__ import annotations

import sys
from typing import List, Optional

import typer

from .. import api
from ..errors import SpecError
from .common import (Impl, ADtype, app, Hardware, KVDtype, Sets, WDtype, _ints, _sets)


@app.command()
def plot(kind: str = typer.Argument(..., help="roofline, latency-throughput, memory, kv, speculative, serving, validation or published"),
         out: str = typer.Option(..., "-o", "--out", help="FILE.png, FILE.svg or FILE.pdf"),
         model: Optional[str] = typer.Option(None, "-m", "--model", help="Model(s); comma list where a plot compares."),
         hardware: str = Hardware, batch: Optional[str] = typer.Option(None, "--batch", help="Batch sizes B: concurrent sequences per replica (comma list)."),
         context: Optional[str] = typer.Option(None, "--context", help="Context S in tokens (comma list)."),
         axis: str = typer.Option("batch", "--axis", help="memory: stack against batch or context."),
         alpha: Optional[str] = typer.Option(None, "--alpha", help="speculative: acceptance rates (comma list)."),
         gamma: Optional[str] = typer.Option(None, "--gamma", help="speculative: draft lengths (comma list)."),
         draft_cost: float = typer.Option(0.1, "--draft-cost", help="speculative: draft step / target step."),
         results: Optional[str] = typer.Option(None, "--results", help="validation: a measurement results folder."),
         weights_dtype: str = WDtype, kv_dtype: Optional[str] = KVDtype, act_dtype: str = ADtype,
         sets: Optional[List[str]] = Sets,
         mode: str = typer.Option("roofline", "--mode", help="roofline (the ideal bound) or achievable: the op times "
                                  "of roofline and latency-throughput, the step cost of serving."),
         impl: Optional[str] = Impl,
         cases: Optional[str] = typer.Option(None, "--cases", help="published: a measurements YAML (default: perfmodel's).")):
    """Publication-ready figures (matplotlib, headless): one call into perfmodel.plots."""
    from .. import plots

    if kind not in plots.KINDS:
        raise SpecError("plot", None, f"unknown kind {kind!r}; choose from {', '.join(plots.KINDS)}")
    if not out.lower().endswith((".png", ".svg", ".pdf")):
        raise SpecError("-o", None, f"write .png, .svg or .pdf, got {out!r}")
    kw: dict = {}
    if batch:
        kw["batch"] = _ints(batch, "--batch")
    if context:
        kw["context"] = _ints(context, "--context")
    fmts = dict(weights_dtype=weights_dtype, kv_dtype=kv_dtype, act_dtype=act_dtype, sets=_sets(sets))
    timed = dict(mode=mode, impl=impl)
    if kind not in ("roofline", "latency-throughput", "serving") and (mode != "roofline" or impl is not None):
        raise SpecError("--mode", None, f"the {kind} plot shows no modelled time; --mode and --impl go with roofline, "
                                        "latency-throughput and serving")
    if kind == "roofline":
        if "context" in kw:
            kw["context"] = kw["context"][0]
        fig = plots.roofline(model or api.DEFAULT_MODEL, hardware, **kw, **fmts, **timed)
    elif kind == "latency-throughput":
        if "context" in kw:
            kw["context"] = kw["context"][0]
        fig = plots.latency_throughput(model or "llama-2-13b,llama-2-13b-gqa8", hardware, **kw, **fmts, **timed)
    elif kind == "memory":
        if axis not in ("batch", "context"):
            raise SpecError("--axis", None, f"must be batch or context, got {axis!r}")
        fig = plots.memory(model or api.DEFAULT_MODEL, hardware, axis=axis, **kw, **fmts)
    elif kind == "kv":
        kv_kw = {"context": kw["context"]} if "context" in kw else {}
        fig = plots.kv(model or plots.kv.__defaults__[0], kv_dtype=kv_dtype or "bf16", sets=_sets(sets), **kv_kw)
    elif kind == "speculative":
        from .. import whatif

        a = whatif._unit_interval(_ints(alpha, "--alpha"), "--alpha") if alpha else None
        g = _ints(gamma, "--gamma") if gamma else None
        fig = plots.speculative(a, g, draft_cost)
    elif kind == "serving":
        api.check_mode(mode, impl, ("roofline", "achievable"))
        fig = plots.serving(model or api.DEFAULT_MODEL, hardware, sets=_sets(sets), **timed)
    elif kind == "published":
        fig = plots.published(path=cases)
    else:
        if not results:
            raise SpecError("--results", None, "the validation plot needs a results folder from `perfmodel measure`")
        fig = plots.validation(results)
    path = plots.save(fig, out)
    sys.stderr.write(f"wrote {path}\n")

