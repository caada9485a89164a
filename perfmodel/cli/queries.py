"""Queries: list, show, decode, prefill, request, intensity, kv, budget."""
from __future__ import annotations

from typing import List, Optional

import typer

from .. import api
from ..report import render, render_vertical
from .common import (_one, ADtype, app, Attn, Energy, EP, Fmt, Hardware, Impl, KVDtype, Micro, Mode, mode_note, Model,
                     PHASE_HUMAN, PP, Price, QEmb, Redundant, Replicas, Sets, TP, WDtype, _cols, _fmt, _human, _ints, _out,
                     _sets, _why)


@app.command("list")
def list_cmd(kind: str = typer.Argument("all", help="hardware, models, impl or all"), fmt: str = Fmt):
    """List the catalogs: hardware, models and implementation profiles (impl)."""
    _out(render(api.list_specs(kind), _fmt(fmt)))


@app.command()
def show(name: str = typer.Argument(..., help="A catalog name or YAML path (model or hardware)."),
         weights_dtype: str = WDtype, kv_dtype: Optional[str] = KVDtype, sets: Optional[List[str]] = Sets,
         fmt: str = Fmt):
    """A spec with derived numbers: params, KV bytes per token, weight bytes (or ridge points)."""
    t = api.show(name, _sets(sets), weights_dtype, kv_dtype)
    if _fmt(fmt) == "json":  # the contract's fields first, then every other field the table shows
        first = ["name", "params", "kv_bytes_per_token", "weight_bytes"] if "params" in t else []
        _out(render({k: t[k] for k in first + [k for k in t if k not in first]}, fmt))
    else:
        _out(render_vertical(t, fmt))


@app.command()
def decode(model: str = Model, hardware: str = Hardware, batch: str = typer.Option("1,8,64,256", "--batch", metavar="<int list>", help="Batch sizes B: concurrent sequences per replica (comma list)."),
           context: str = typer.Option("1024", "--context", metavar="<int list>", help="Context S in tokens (comma list)."), mode: str = Mode, weights_dtype: str = WDtype,
           kv_dtype: Optional[str] = KVDtype, act_dtype: str = ADtype, attention: str = Attn,
           sets: Optional[List[str]] = Sets, fmt: str = Fmt, quantize_embeddings: bool = QEmb,
           tp: int = TP, pp: int = PP, ep: int = EP, replicas: int = Replicas, microbatches: Optional[int] = Micro,
           price: Optional[str] = Price, energy: bool = Energy, impl: Optional[str] = Impl,
           redundant_experts: int = Redundant):
    """One decode step per batch size: latency, throughput (B / step), memory and fit."""
    t = api.decode(model, hardware, _ints(batch, "--batch"), _ints(context, "--context"), mode, weights_dtype,
                   kv_dtype, act_dtype, attention, _sets(sets), quantize_embeddings, tp, pp, ep, replicas, microbatches,
                   price, energy, impl, redundant_experts)
    _out(render(t, _fmt(fmt), _cols(t), _human(t, PHASE_HUMAN)))
    if fmt == "table":
        _out(_why(t, hardware, _sets(sets), api._prec(weights_dtype, kv_dtype, act_dtype, quantize_embeddings)))
        _out(mode_note(mode, impl, hardware, _sets(sets)))


@app.command()
def prefill(model: str = Model, hardware: str = Hardware, batch: str = typer.Option("1", "--batch", metavar="<int list>", help="Batch sizes B: concurrent sequences per replica (comma list)."),
            context: str = typer.Option("128,512,1024,4096", "--context", metavar="<int list>", help="Prompt length(s)."), mode: str = Mode,
            weights_dtype: str = WDtype, kv_dtype: Optional[str] = KVDtype, act_dtype: str = ADtype,
            attention: str = Attn, sets: Optional[List[str]] = Sets, fmt: str = Fmt,
            quantize_embeddings: bool = QEmb, tp: int = TP, pp: int = PP, ep: int = EP, replicas: int = Replicas,
            impl: Optional[str] = Impl, redundant_experts: int = Redundant):
    """Prefill of the prompt (time to first token); throughput counts prompt tokens per second."""
    t = api.prefill(model, hardware, _ints(batch, "--batch"), _ints(context, "--context"), mode, weights_dtype,
                    kv_dtype, act_dtype, attention, _sets(sets), quantize_embeddings, tp, pp, ep, replicas, impl=impl,
                    redundant_experts=redundant_experts)
    _out(render(t, _fmt(fmt), _cols(t), _human(t, PHASE_HUMAN)))
    if fmt == "table":
        _out(mode_note(mode, impl, hardware, _sets(sets)))


@app.command()
def request(model: str = Model, hardware: str = Hardware, batch: str = typer.Option("1", "--batch", metavar="<int list>", help="Batch sizes B: concurrent sequences per replica (comma list)."),
            prompt: str = typer.Option("1024", "--prompt", metavar="<int list>", help="Prompt tokens P (comma list allowed)."),
            generate: str = typer.Option("256", "--generate", metavar="<int>", help="Generated tokens G (a count: 256, 4k)."), mode: str = Mode,
            weights_dtype: str = WDtype, kv_dtype: Optional[str] = KVDtype, act_dtype: str = ADtype,
            attention: str = Attn, sets: Optional[List[str]] = Sets, fmt: str = Fmt,
            quantize_embeddings: bool = QEmb, tp: int = TP, pp: int = PP, ep: int = EP, replicas: int = Replicas,
            microbatches: Optional[int] = Micro, price: Optional[str] = Price, energy: bool = Energy,
            impl: Optional[str] = Impl, redundant_experts: int = Redundant):
    """A whole request: prefill P tokens, then G decode steps with a growing context."""
    t = api.request(model, hardware, _ints(batch, "--batch"), _ints(prompt, "--prompt"), generate, mode,
                    weights_dtype, kv_dtype, act_dtype, attention, _sets(sets), quantize_embeddings, tp, pp, ep,
                    replicas, microbatches, price, energy, impl, redundant_experts)
    human = ["model", "hardware", "batch", "prompt", "generate", "mode", "ttft_s", "decode_s", "latency_s",
             "throughput_tok_s", "memory_bytes", "fits", "bound"]
    _out(render(t, _fmt(fmt), _cols(t, ["prompt", "generate", "ttft_s"]), _human(t, human)))
    if fmt == "table":
        _out(mode_note(mode, impl, hardware, _sets(sets)))


@app.command()
def intensity(model: str = Model, hardware: str = Hardware, batch: str = typer.Option("1", "--batch", metavar="<int>", help="Batch size B: concurrent sequences per replica (one value)."),
              context: str = typer.Option("1024", "--context", metavar="<int>", help="Context S in tokens (one value)."), weights_dtype: str = WDtype,
              kv_dtype: Optional[str] = KVDtype, act_dtype: str = ADtype, attention: str = Attn,
              sets: Optional[List[str]] = Sets, fmt: str = Fmt, quantize_embeddings: bool = QEmb,
              tp: int = TP, pp: int = PP, ep: int = EP,
              mode: str = typer.Option("roofline", "--mode", metavar="<mode>", help="roofline (ideal per-op times) or achievable."),
              impl: Optional[str] = Impl, redundant_experts: int = Redundant):
    """Per-op FLOPs, bytes, arithmetic intensity, time and bound for prefill and decode (collectives too)."""
    t = api.intensity(model, hardware, _one(batch, "--batch"), _one(context, "--context"), weights_dtype, kv_dtype, act_dtype, attention, _sets(sets),
                      quantize_embeddings=quantize_embeddings, tp=tp, pp=pp, ep=ep, mode=mode, impl=impl,
                      redundant_experts=redundant_experts)
    ach = "impl" in t
    cols = ["op", "phase", "flops", "bytes", "intensity", "time_s", "bound", "mode"] + (["impl", "priced_by"] if ach else [])
    _out(render(t, _fmt(fmt), cols, ["phase", "op", "layers", "flops", "bytes", "intensity", "time_s", "bound"]
                + (["priced_by"] if ach else [])))
    if fmt == "table":
        _out(mode_note(mode, impl, hardware, _sets(sets)))


@app.command()
def kv(model: str = Model, context: str = typer.Option("1024", "--context", metavar="<int list>", help="Context S in tokens (comma list)."), batch: str = typer.Option("1", "--batch", metavar="<int list>", help="Batch sizes B: concurrent sequences per replica (comma list)."),
       kv_dtype: str = typer.Option("bf16", "--kv-dtype", metavar="<format>", help="KV-cache format."), sets: Optional[List[str]] = Sets, fmt: str = Fmt):
    """KV-cache bytes per token and per batch, for one or more models."""
    t = api.kv(model, _ints(context, "--context"), _ints(batch, "--batch"), kv_dtype, _sets(sets))
    _out(render(t, _fmt(fmt)))


@app.command()
def budget(model: str = Model, hardware: Optional[str] = typer.Option(None, "-H", "--hardware", metavar="<name list>", help="Hardware catalog name or YAML path."),
           memory: Optional[str] = typer.Option(None, "--memory", metavar="<bytes>", help="Device memory instead of -H, e.g. 24GiB."),
           overhead: str = typer.Option("0", "--overhead", metavar="<bytes>", help="Reserved memory, e.g. 1.5GiB."),
           weights_dtype: str = WDtype, kv_dtype: Optional[str] = KVDtype, act_dtype: str = ADtype,
           context: str = typer.Option("1024", "--context", metavar="<int list>", help="Context S in tokens (comma list)."), sets: Optional[List[str]] = Sets, fmt: str = Fmt,
           quantize_embeddings: bool = QEmb, tp: int = TP, pp: int = PP, ep: int = EP, replicas: int = Replicas,
           redundant_experts: int = Redundant):
    """The inverse question: how many KV tokens fit, and how many users at a context (per replica)."""
    t = api.budget(model, hardware, memory, overhead, weights_dtype, kv_dtype, act_dtype,
                   _ints(context, "--context"), _sets(sets), quantize_embeddings, tp, pp, ep, replicas,
                   redundant_experts)
    _out(render(t, _fmt(fmt), ["model", "max_tokens", "max_batch", "weight_bytes", "context"],
                ["model", "hardware", "memory_capacity", "overhead_bytes", "weight_bytes", "context",
                 "kv_bytes_per_token", "max_tokens", "max_batch"]))

