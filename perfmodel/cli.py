"""`perfmodel` command line: each command is one call into perfmodel.api plus formatting.

Bad input (a YAML file, an option) prints one line `perfmodel: error: <where>: <field>: <problem>`
and exits 2; never a traceback.
"""
from __future__ import annotations

import sys
import warnings
from typing import List, Optional

import importlib

import numpy as np
import typer
import yaml

from . import api
from .errors import ContextWarning, SpecError
from .specs import safe_yaml
from .report import FORMATS, render, render_vertical

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  rich_markup_mode=None, help="Analytical roofline calculator for LLM inference.")

# ---------------------------------------------------------------- shared options
Model = typer.Option(api.DEFAULT_MODEL, "-m", "--model", help="Model catalog name or YAML path (comma list allowed).")
Hardware = typer.Option(api.DEFAULT_HARDWARE, "-H", "--hardware", help="Hardware catalog name or YAML path (comma list allowed).")
Mode = typer.Option("roofline", "--mode", help="roofline: sum of per-op roofline times; simple: (weights + B*KV)/bandwidth.")
WDtype = typer.Option("bf16", "--weights-dtype", help="Weight format: fp32, bf16, fp16, fp8, int8, int4[-gN].")
KVDtype = typer.Option(None, "--kv-dtype", help="KV-cache format (default: the activation format).")
ADtype = typer.Option("bf16", "--act-dtype", help="Activation/compute format; fp8/int8 use the 8-bit tensor rate.")
Attn = typer.Option("fused", "--attention", help="fused (FlashAttention: no score matrix in HBM) or unfused.")
Sets = typer.Option(None, "--set", help="Override a spec field: key=value (repeatable), e.g. n_kv_heads=8, memory_bandwidth='4 TB/s'.")
Fmt = typer.Option("table", "--format", help="table (for people), json or csv (SI units).")
TP = typer.Option(1, "--tp", help="Tensor-parallel devices per replica.")
PP = typer.Option(1, "--pp", help="Pipeline stages per replica.")
EP = typer.Option(1, "--ep", help="Expert-parallel device groups per replica (MoE).")
Replicas = typer.Option(1, "--replicas", help="Model replicas (data parallel).")
Micro = typer.Option(None, "--microbatches", help="Pipeline micro-batches (default: pp).")
Price = typer.Option(None, "--price", help="USD per device-hour, e.g. 2.49/h: adds cost_per_million_tokens.")
Energy = typer.Option(False, "--energy", help="Add energy_per_token_j (at measured power, else TDP: an upper bound).")
QEmb = typer.Option(False, "--quantize-embeddings", help="Quantize embeddings and LM head too (default: kept 16-bit).")


def _ints(text: str, opt: str) -> list[float]:
    try:
        vals = [float(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise SpecError(opt, None, f"expected comma-separated numbers, got {text!r}") from None
    if not vals:
        raise SpecError(opt, None, "needs at least one value")
    return vals


def _sets(items: Optional[List[str]]) -> dict:
    out = {}
    for it in items or []:
        if "=" not in it:
            raise SpecError("--set", it, "expected key=value")
        k, v = it.split("=", 1)
        try:
            out[k.strip()] = safe_yaml(v) if v.strip() else None
        except yaml.YAMLError:
            out[k.strip()] = v
    return out


def _fmt(fmt: str) -> str:
    if fmt not in FORMATS:
        raise SpecError("--format", None, f"must be one of {', '.join(FORMATS)}, got {fmt!r}")
    return fmt


def _out(text: str) -> None:
    sys.stdout.write(text + "\n")


_ECON = ["cost_per_million_tokens", "energy_per_token_j"]


def _cols(t, extra=()):
    """The JSON contract's columns, plus the layout's and the economics' when asked for."""
    return api.PHASE_COLUMNS + list(extra) + [c for c in api.LAYOUT_COLUMNS + _ECON if c in t]


def _human(t, base):
    return base + [c for c in ["tp", "pp", "ep", "replicas", "comm_time_s"] + _ECON if c in t]


PHASE_HUMAN = ["model", "hardware", "batch", "context", "mode", "latency_s", "throughput_tok_s", "weight_bytes",
               "kv_cache_bytes", "memory_bytes", "fits", "bound", "intensity"]


def _why(table, hardware, sets, prec=None) -> str:
    """A footer that says why: the ridge point against the step's intensity, and the formats used."""
    from .whatif import quantization_note

    _, hws = api.specs(api.DEFAULT_MODEL, hardware, sets)
    dt = prec.formats()[1].peak if prec else "bf16"
    notes = [f"ridge of {hw.name}: {hw.ridge(dt):.0f} FLOP/B ({dt} peak / bandwidth)" for hw in hws]
    if prec and (prec.weights, prec.act, prec.kv) != ("bf16", "bf16", None):
        notes.append(quantization_note(prec))
    if len(table["fits"]) and not all(table["fits"]):
        notes.append("fits=NO: weights + KV cache + activations exceed the device memory")
    notes.append("a step whose intensity is below the ridge is memory-bound; `perfmodel intensity` gives the per-op table")
    return "\n".join("# " + n for n in notes)


# ---------------------------------------------------------------- commands
@app.command("list")
def list_cmd(kind: str = typer.Argument("all", help="hardware, models or all"), fmt: str = Fmt):
    """List the hardware and model catalogs."""
    _out(render(api.list_specs(kind), _fmt(fmt)))


@app.command()
def show(name: str = typer.Argument(..., help="A catalog name or YAML path (model or hardware)."),
         weights_dtype: str = WDtype, kv_dtype: Optional[str] = KVDtype, sets: Optional[List[str]] = Sets,
         fmt: str = Fmt):
    """A spec with derived numbers: params, KV bytes per token, weight bytes (or ridge points)."""
    t = api.show(name, _sets(sets), weights_dtype, kv_dtype)
    if _fmt(fmt) == "json":
        cols = ["name", "params", "kv_bytes_per_token", "weight_bytes"] if "params" in t else None
        _out(render({k: t[k] for k in (cols or t)}, fmt))
    else:
        _out(render_vertical(t, fmt))


@app.command()
def decode(model: str = Model, hardware: str = Hardware, batch: str = typer.Option("1,8,64,256", "--batch", help="Batch sizes B: concurrent sequences per replica (comma list)."),
           context: str = typer.Option("1024", "--context", help="Context S in tokens (comma list)."), mode: str = Mode, weights_dtype: str = WDtype,
           kv_dtype: Optional[str] = KVDtype, act_dtype: str = ADtype, attention: str = Attn,
           sets: Optional[List[str]] = Sets, fmt: str = Fmt, quantize_embeddings: bool = QEmb,
           tp: int = TP, pp: int = PP, ep: int = EP, replicas: int = Replicas, microbatches: Optional[int] = Micro,
           price: Optional[str] = Price, energy: bool = Energy):
    """One decode step per batch size: latency, throughput (B / step), memory and fit."""
    t = api.decode(model, hardware, _ints(batch, "--batch"), _ints(context, "--context"), mode, weights_dtype,
                   kv_dtype, act_dtype, attention, _sets(sets), quantize_embeddings, tp, pp, ep, replicas, microbatches,
                   price, energy)
    _out(render(t, _fmt(fmt), _cols(t), _human(t, PHASE_HUMAN)))
    if fmt == "table":
        _out(_why(t, hardware, _sets(sets), api._prec(weights_dtype, kv_dtype, act_dtype, quantize_embeddings)))


@app.command()
def prefill(model: str = Model, hardware: str = Hardware, batch: str = typer.Option("1", "--batch", help="Batch sizes B: concurrent sequences per replica (comma list)."),
            context: str = typer.Option("128,512,1024,4096", "--context", help="Prompt length(s)."), mode: str = Mode,
            weights_dtype: str = WDtype, kv_dtype: Optional[str] = KVDtype, act_dtype: str = ADtype,
            attention: str = Attn, sets: Optional[List[str]] = Sets, fmt: str = Fmt,
            quantize_embeddings: bool = QEmb, tp: int = TP, pp: int = PP, ep: int = EP, replicas: int = Replicas):
    """Prefill of the prompt (time to first token); throughput counts prompt tokens per second."""
    t = api.prefill(model, hardware, _ints(batch, "--batch"), _ints(context, "--context"), mode, weights_dtype,
                    kv_dtype, act_dtype, attention, _sets(sets), quantize_embeddings, tp, pp, ep, replicas)
    _out(render(t, _fmt(fmt), _cols(t), _human(t, PHASE_HUMAN)))


@app.command()
def request(model: str = Model, hardware: str = Hardware, batch: str = typer.Option("1", "--batch", help="Batch sizes B: concurrent sequences per replica (comma list)."),
            prompt: str = typer.Option("1024", "--prompt", help="Prompt tokens P (comma list allowed)."),
            generate: int = typer.Option(256, "--generate", help="Generated tokens G."), mode: str = Mode,
            weights_dtype: str = WDtype, kv_dtype: Optional[str] = KVDtype, act_dtype: str = ADtype,
            attention: str = Attn, sets: Optional[List[str]] = Sets, fmt: str = Fmt,
            quantize_embeddings: bool = QEmb, tp: int = TP, pp: int = PP, ep: int = EP, replicas: int = Replicas,
            microbatches: Optional[int] = Micro, price: Optional[str] = Price, energy: bool = Energy):
    """A whole request: prefill P tokens, then G decode steps with a growing context."""
    t = api.request(model, hardware, _ints(batch, "--batch"), _ints(prompt, "--prompt"), generate, mode,
                    weights_dtype, kv_dtype, act_dtype, attention, _sets(sets), quantize_embeddings, tp, pp, ep,
                    replicas, microbatches, price, energy)
    human = ["model", "hardware", "batch", "prompt", "generate", "ttft_s", "decode_s", "latency_s",
             "throughput_tok_s", "memory_bytes", "fits", "bound"]
    _out(render(t, _fmt(fmt), _cols(t, ["prompt", "generate", "ttft_s"]), _human(t, human)))


@app.command()
def intensity(model: str = Model, hardware: str = Hardware, batch: float = typer.Option(1, "--batch", help="Batch sizes B: concurrent sequences per replica (comma list)."),
              context: float = typer.Option(1024, "--context", help="Context S in tokens (comma list)."), weights_dtype: str = WDtype,
              kv_dtype: Optional[str] = KVDtype, act_dtype: str = ADtype, attention: str = Attn,
              sets: Optional[List[str]] = Sets, fmt: str = Fmt, quantize_embeddings: bool = QEmb,
              tp: int = TP, pp: int = PP, ep: int = EP):
    """Per-op FLOPs, bytes, arithmetic intensity, time and bound for prefill and decode (collectives too)."""
    t = api.intensity(model, hardware, batch, context, weights_dtype, kv_dtype, act_dtype, attention, _sets(sets),
                      quantize_embeddings=quantize_embeddings, tp=tp, pp=pp, ep=ep)
    cols = ["op", "phase", "flops", "bytes", "intensity", "time_s", "bound"]
    _out(render(t, _fmt(fmt), cols, ["phase", "op", "layers", "flops", "bytes", "intensity", "time_s", "bound"]))


@app.command()
def kv(model: str = Model, context: str = typer.Option("1024", "--context", help="Context S in tokens (comma list)."), batch: str = typer.Option("1", "--batch", help="Batch sizes B: concurrent sequences per replica (comma list)."),
       kv_dtype: str = typer.Option("bf16", "--kv-dtype", help="KV-cache format."), sets: Optional[List[str]] = Sets, fmt: str = Fmt):
    """KV-cache bytes per token and per batch, for one or more models."""
    t = api.kv(model, _ints(context, "--context"), _ints(batch, "--batch"), kv_dtype, _sets(sets))
    _out(render(t, _fmt(fmt)))


@app.command()
def budget(model: str = Model, hardware: Optional[str] = typer.Option(None, "-H", "--hardware", help="Hardware catalog name or YAML path."),
           memory: Optional[str] = typer.Option(None, "--memory", help="Device memory instead of -H, e.g. 24GiB."),
           overhead: str = typer.Option("0", "--overhead", help="Reserved memory, e.g. 1.5GiB."),
           weights_dtype: str = WDtype, kv_dtype: Optional[str] = KVDtype, act_dtype: str = ADtype,
           context: str = typer.Option("1024", "--context", help="Context S in tokens (comma list)."), sets: Optional[List[str]] = Sets, fmt: str = Fmt,
           quantize_embeddings: bool = QEmb, tp: int = TP, pp: int = PP, ep: int = EP, replicas: int = Replicas):
    """The inverse question: how many KV tokens fit, and how many users at a context (per replica)."""
    t = api.budget(model, hardware, memory, overhead, weights_dtype, kv_dtype, act_dtype,
                   _ints(context, "--context"), _sets(sets), quantize_embeddings, tp, pp, ep, replicas)
    _out(render(t, _fmt(fmt), ["model", "max_tokens", "max_batch", "weight_bytes", "context"],
                ["model", "hardware", "memory_capacity", "overhead_bytes", "weight_bytes", "context",
                 "kv_bytes_per_token", "max_tokens", "max_batch"]))


# ---------------------------------------------------------------- what-ifs (perfmodel.whatif)
def _floats(text: str, opt: str) -> list[float]:
    return _ints(text, opt)


@app.command()
def formats(fmt: str = Fmt):
    """Storage formats with bits per weight (scales included) and the tensor rate they compute at."""
    from . import whatif

    _out(render(whatif.formats(), _fmt(fmt)))


@app.command()
def weights(model: str = Model, weights_dtype: str = WDtype, act_dtype: str = ADtype, quantize_embeddings: bool = QEmb,
            sets: Optional[List[str]] = Sets, fmt: str = Fmt):
    """Which layers are stored in which format: parameters and bytes per component."""
    from . import whatif

    _out(render(whatif.weights(model, weights_dtype, act_dtype, quantize_embeddings, _sets(sets)), _fmt(fmt)))
    if fmt == "table":
        _out("# " + whatif.quantization_note(api._prec(weights_dtype, None, act_dtype, quantize_embeddings)))


@app.command()
def compare(model: str = typer.Option("llama-2-13b,llama-2-13b-gqa8,llama-2-13b-mla,llama-2-13b-cla2,llama-2-13b-swa,llama-2-13b-linear",
                                      "-m", "--model", help="Comma list; ratios are against the first."),
            hardware: str = Hardware, batch: str = typer.Option("1,64,256", "--batch", help="Batch sizes B: concurrent sequences per replica (comma list)."),
            context: str = typer.Option("1024,8192,32768", "--context", help="Context S in tokens (comma list)."), mode: str = Mode, weights_dtype: str = WDtype,
            kv_dtype: Optional[str] = KVDtype, act_dtype: str = ADtype, attention: str = Attn,
            quantize_embeddings: bool = QEmb, sets: Optional[List[str]] = Sets, fmt: str = Fmt):
    """Models side by side: KV per token and sequence, memory, latency, throughput, max batch, ratios."""
    from . import whatif

    t = whatif.compare(model, hardware, _ints(batch, "--batch"), _ints(context, "--context"), mode, weights_dtype,
                       kv_dtype, act_dtype, attention, _sets(sets), quantize_embeddings)
    human = ["model", "batch", "context", "kv_bytes_per_token", "kv_bytes_per_seq", "memory_bytes", "fits",
             "latency_s", "throughput_tok_s", "max_batch", "kv_ratio", "latency_ratio", "throughput_ratio",
             "max_batch_ratio"]
    _out(render(t, _fmt(fmt), api.PHASE_COLUMNS + ["kv_bytes_per_token", "max_batch"], human))


@app.command()
def speculative(alpha: str = typer.Option("0.6,0.8,0.9", "--alpha", help="Acceptance rate(s) in [0, 1]."),
                gamma: str = typer.Option("1,2,3,4,5,8", "--gamma", help="Draft tokens per round."),
                draft_cost: str = typer.Option("0.05", "--draft-cost", help="Draft step / target step."),
                draft: Optional[str] = typer.Option(None, "--draft", help="Draft model: costs from the roofline."),
                target: Optional[str] = typer.Option(None, "--target", help="Target model."),
                hardware: str = Hardware, batch: float = typer.Option(1, "--batch", help="Batch sizes B: concurrent sequences per replica (comma list)."),
                context: float = typer.Option(1024, "--context", help="Context S in tokens (comma list)."), weights_dtype: str = WDtype,
                kv_dtype: Optional[str] = KVDtype, act_dtype: str = ADtype, sets: Optional[List[str]] = Sets,
                fmt: str = Fmt):
    """Speculative decoding: expected tokens per round, speedup, best gamma (slower than plain is shown)."""
    from . import whatif

    t = whatif.speculative(_floats(alpha, "--alpha"), _ints(gamma, "--gamma"), _floats(draft_cost, "--draft-cost"),
                           draft, target, hardware, batch, context, weights_dtype, kv_dtype, act_dtype, _sets(sets))
    cols = ["alpha", "gamma", "draft_cost", "expected_tokens", "speedup", "best_gamma"]
    extra = ["verify_cost", "slower"] + (["draft", "target", "batch", "context"] if draft else [])
    _out(render(t, _fmt(fmt), cols, cols + extra))
    if fmt == "table" and t["slower"].any():
        _out("# slower=true: speculation loses to plain decoding here (low alpha, costly draft, long gamma,"
             " or a verification pass that is no longer cheap at this batch)")


@app.command()
def attention(seq: str = typer.Option("512,2048,8192,32768,131072", "--seq", help="Sequence lengths (comma list)."),
              heads: int = typer.Option(32, "--heads", help="Query heads."), head_dim: int = typer.Option(128, "--head-dim", help="Head dimension H."),
              kv_heads: Optional[int] = typer.Option(None, "--kv-heads", help="KV heads (default: --heads)."), batch: float = typer.Option(1, "--batch", help="Batch sizes B: concurrent sequences per replica (comma list)."),
              dtype: str = typer.Option("fp16", "--dtype", help="Element format of Q, K, V and scores."),
              model: Optional[str] = typer.Option(None, "-m", "--model", help="Take heads and head dim from a model."),
              sets: Optional[List[str]] = Sets, fmt: str = Fmt):
    """One attention call, fused (FlashAttention) against unfused: score matrix, HBM traffic, peak memory."""
    from . import whatif

    t = whatif.attention_kernels(_ints(seq, "--seq"), heads, head_dim, kv_heads, batch, dtype, model, _sets(sets))
    _out(render(t, _fmt(fmt), None, ["seq", "heads", "dtype", "score_bytes_per_head", "score_bytes_per_layer",
                                     "fused_hbm_bytes", "unfused_hbm_bytes", "traffic_ratio", "fused_peak_bytes",
                                     "unfused_peak_bytes"]))


@app.command("generation-cost")
def generation_cost(model: str = Model, tokens: str = typer.Option("256,1024,4096", "--tokens", help="Tokens to generate (comma list)."),
                    batch: float = typer.Option(1, "--batch", help="Batch sizes B: concurrent sequences per replica (comma list)."), weights_dtype: str = WDtype,
                    kv_dtype: Optional[str] = KVDtype, act_dtype: str = ADtype, sets: Optional[List[str]] = Sets,
                    fmt: str = Fmt):
    """MACs, bytes and memory to generate T tokens with a KV cache and without one (recomputing the prefix)."""
    from . import whatif

    t = whatif.generation_cost(model, _ints(tokens, "--tokens"), batch, weights_dtype, kv_dtype, act_dtype, _sets(sets))
    _out(render(t, _fmt(fmt), None, ["model", "tokens", "macs_cached", "macs_uncached", "macs_ratio", "bytes_cached",
                                     "bytes_uncached", "bytes_ratio", "memory_cached", "memory_uncached"]))


@app.command()
def sweep(models: str = typer.Option(api.DEFAULT_MODEL, "-m", "--models", help="Comma list of models."),
          hardware: str = typer.Option(api.DEFAULT_HARDWARE, "-H", "--hardware", help="Comma list of hardware."),
          batch: str = typer.Option("1:512:x2", "--batch", help="List '1,8', geometric '1:512:x2' or arithmetic '1:1024:1'."),
          context: str = typer.Option("128:131072:x2", "--context", help="Same syntax as --batch."),
          weights_dtype: str = typer.Option("bf16", "--weights-dtype", help="Comma list of formats."),
          kv_dtype: Optional[str] = typer.Option(None, "--kv-dtype", help="Comma list of KV formats."),
          act_dtype: str = ADtype, mode: str = Mode, sets: Optional[List[str]] = Sets,
          out: Optional[str] = typer.Option(None, "-o", "--out", help="Stream to FILE.csv or FILE.parquet."),
          chunk_rows: int = typer.Option(1_000_000, "--chunk-rows", help="Rows evaluated and written per chunk."),
          progress: Optional[bool] = typer.Option(None, "--progress/--no-progress", help="Default: on a terminal."),
          fmt: str = Fmt):
    """Decode metrics over a whole grid (models x hardware x formats x batch x context), vectorized."""
    from . import grid as sw

    if chunk_rows < 1:
        raise SpecError("--chunk-rows", None, "must be at least 1")
    kv = kv_dtype.split(",") if kv_dtype else [None]
    if mode not in ("roofline", "simple"):
        raise SpecError("--mode", None, f"must be roofline or simple, got {mode!r}")
    if out:
        r = sw.sweep(models, hardware, batch, context, weights_dtype.split(","), kv, act_dtype, mode, _sets(sets),
                     out, chunk_rows, progress)
        sys.stderr.write(f"wrote {r['rows']:,} rows to {r['path']} in {r['seconds']:.2f} s\n")
        return
    n = sw.grid_size(models, hardware, batch, context, weights_dtype.split(","), kv)
    if n > 100_000:
        raise SpecError("sweep", None, f"{n:,} rows: write them to a file with -o FILE.csv")
    t = api.concat(list(sw.iter_chunks(models, hardware, batch, context, weights_dtype.split(","), kv, act_dtype,
                                       mode, _sets(sets), chunk_rows)))
    _out(render(t, _fmt(fmt)))


@app.command()
def plan(model: str = typer.Option("llama-3.1-70b", "-m", "--model", help="Model catalog name or YAML path."), hardware: str = Hardware,
         gpus: int = typer.Option(8, "--gpus", help="Devices to spread over."),
         context: float = typer.Option(4096, "--context", help="Context S in tokens (comma list)."), batch: str = typer.Option("1,8,32,128", "--batch", help="Batch sizes B: concurrent sequences per replica (comma list)."),
         max_latency: Optional[str] = typer.Option(None, "--max-latency", help="Per-token latency limit, e.g. 50ms."),
         weights_dtype: str = WDtype, kv_dtype: Optional[str] = KVDtype, act_dtype: str = ADtype,
         sets: Optional[List[str]] = Sets, fmt: str = Fmt, price: Optional[str] = Price, energy: bool = Energy):
    """Every tp/pp/ep/replicas layout of N devices: latency, throughput per device, memory, Pareto front."""
    from . import parallel

    t, summary = parallel.plan(model, hardware, gpus, context, _ints(batch, "--batch"), max_latency, weights_dtype,
                               kv_dtype, act_dtype, _sets(sets), price, energy)
    econ = [c for c in _ECON if c in t]
    _out(render(t, _fmt(fmt), parallel.PLAN_COLUMNS + econ,
                ["tp", "pp", "ep", "replicas", "batch", "latency_s", "throughput_tok_s", "throughput_per_device",
                 "memory_bytes", "fits", "comm_time_s", "pareto"] + econ))
    if fmt == "table":
        need = summary["min_devices"]
        _out(f"# pareto=true: no other fitting layout is both faster and more efficient per device"
             + (f" (latency <= {max_latency})" if max_latency else "")
             + f"\n# fewest devices that hold {summary['model']} at context {summary['context']:g}: "
             + (f"{need} ({summary['min_layout']})" if need else "none up to 4096")
             + (f"\n# warning: {summary['warning']}" if summary["warning"] else ""))


@app.command()
def plot(kind: str = typer.Argument(..., help="roofline, latency-throughput, memory, kv, speculative, serving or validation"),
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
         sets: Optional[List[str]] = Sets):
    """Publication-ready figures (matplotlib, headless): one call into perfmodel.plots."""
    from . import plots

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
    if kind == "roofline":
        if "context" in kw:
            kw["context"] = kw["context"][0]
        fig = plots.roofline(model or api.DEFAULT_MODEL, hardware, **kw, **fmts)
    elif kind == "latency-throughput":
        if "context" in kw:
            kw["context"] = kw["context"][0]
        fig = plots.latency_throughput(model or "llama-2-13b,llama-2-13b-gqa8", hardware, **kw, **fmts)
    elif kind == "memory":
        if axis not in ("batch", "context"):
            raise SpecError("--axis", None, f"must be batch or context, got {axis!r}")
        fig = plots.memory(model or api.DEFAULT_MODEL, hardware, axis=axis, **kw, **fmts)
    elif kind == "kv":
        kv_kw = {"context": kw["context"]} if "context" in kw else {}
        fig = plots.kv(model or plots.kv.__defaults__[0], kv_dtype=kv_dtype or "bf16", sets=_sets(sets), **kv_kw)
    elif kind == "speculative":
        from . import whatif

        a = whatif._unit_interval(_ints(alpha, "--alpha"), "--alpha") if alpha else None
        g = _ints(gamma, "--gamma") if gamma else None
        fig = plots.speculative(a, g, draft_cost)
    elif kind == "serving":
        fig = plots.serving(model or api.DEFAULT_MODEL, hardware, sets=_sets(sets))
    else:
        if not results:
            raise SpecError("--results", None, "the validation plot needs a results folder from `perfmodel measure`")
        fig = plots.validation(results)
    path = plots.save(fig, out)
    sys.stderr.write(f"wrote {path}\n")


from . import cli_serving  # noqa: E402,F401  registers serve-sim and kv-memory
from . import cli_measure  # noqa: E402,F401  registers measure and validate
from . import cli_import  # noqa: E402,F401  registers import-config


def _click_errors():
    """Typer >= 0.26 vendors click as typer._click; older typer uses click itself. Catch both."""
    mods = []
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            mods.append(importlib.import_module(name))
        except ImportError:
            pass
    get = lambda attr: tuple(getattr(m, attr) for m in mods if hasattr(m, attr))  # noqa: E731
    return get("NoArgsIsHelpError"), get("UsageError"), get("Abort"), get("Exit")


def main(argv: Optional[list] = None) -> int:
    """Entry point: runs the app, turning every bad-input path into one line and exit code 2.
    A context beyond a model's max_context adds one `perfmodel: warning:` line to a result."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ContextWarning)
        code = _main(argv)
    mine = [w for w in caught if issubclass(w.category, ContextWarning)]
    for w in caught:
        if w not in mine:  # other warnings pass through unchanged
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if code == 0 and mine:
        sys.stderr.write("perfmodel: warning: beyond max_context (computed anyway; the model was not trained this "
                         f"long): {'; '.join(dict.fromkeys(str(w.message) for w in mine))}\n")
    return code


def _main(argv: Optional[list] = None) -> int:
    no_args, usage, abort, exit_ = _click_errors()
    try:
        with np.errstate(over="raise", invalid="raise", divide="raise"):  # a non-finite result is an error
            app(args=argv, prog_name="perfmodel", standalone_mode=False)
    except SpecError as e:
        sys.stderr.write(f"perfmodel: error: {e}\n")
        return 2
    except no_args as e:  # bare `perfmodel`: the help text
        sys.stdout.write(e.ctx.get_help() + "\n")
        return 0
    except usage as e:
        msg = " ".join(e.format_message().split())  # one line
        sys.stderr.write(f"perfmodel: error: {msg}\n")
        return 2
    except abort:
        sys.stderr.write("perfmodel: aborted\n")
        return 1
    except exit_ as e:
        return e.exit_code
    except FloatingPointError as e:
        sys.stderr.write(f"perfmodel: error: a result is not finite in float64 ({e}); an input is out of range\n")
        return 2
    except (ValueError, OverflowError, ZeroDivisionError) as e:  # a value the engine rejects
        from .errors import _one_line

        sys.stderr.write(f"perfmodel: error: {_one_line(e)}\n")
        return 2
    except BrokenPipeError:
        return 0
    return 0


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":  # python -m perfmodel.cli: run the module the command plugins registered on
    from perfmodel.cli import run as _run

    _run()
