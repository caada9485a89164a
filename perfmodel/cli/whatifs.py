"""What-ifs (perfmodel.whatif): formats, weights, compare, speculative, attention, generation-cost."""
from __future__ import annotations

from typing import List, Optional

import typer

from .. import api
from ..report import render
from .common import (_one, ADtype, app, Attn, Fmt, Hardware, Impl, KVDtype, Mode, mode_note, Model, QEmb, Sets, WDtype,
                     _fmt, _ints, _out, _sets)


def _floats(text: str, opt: str) -> list[float]:
    return _ints(text, opt)


@app.command()
def formats(fmt: str = Fmt):
    """Storage formats with bits per weight (scales included) and the tensor rate they compute at."""
    from .. import whatif

    _out(render(whatif.formats(), _fmt(fmt)))


@app.command()
def weights(model: str = Model, weights_dtype: str = WDtype, act_dtype: str = ADtype, quantize_embeddings: bool = QEmb,
            sets: Optional[List[str]] = Sets, fmt: str = Fmt):
    """Which layers are stored in which format: parameters and bytes per component."""
    from .. import whatif

    _out(render(whatif.weights(model, weights_dtype, act_dtype, quantize_embeddings, _sets(sets)), _fmt(fmt)))
    if fmt == "table":
        _out("# " + whatif.quantization_note(api._prec(weights_dtype, None, act_dtype, quantize_embeddings)))


@app.command()
def compare(model: str = typer.Option("llama-2-13b,llama-2-13b-gqa8,llama-2-13b-mla,llama-2-13b-cla2,llama-2-13b-swa,llama-2-13b-linear",
                                      "-m", "--model", metavar="<name list>", help="Comma list; ratios are against the first."),
            hardware: str = Hardware, batch: str = typer.Option("1,64,256", "--batch", metavar="<int list>", help="Batch sizes B: concurrent sequences per replica (comma list)."),
            context: str = typer.Option("1024,8192,32768", "--context", metavar="<int list>", help="Context S in tokens (comma list)."), mode: str = Mode, weights_dtype: str = WDtype,
            kv_dtype: Optional[str] = KVDtype, act_dtype: str = ADtype, attention: str = Attn,
            quantize_embeddings: bool = QEmb, sets: Optional[List[str]] = Sets, fmt: str = Fmt,
            impl: Optional[str] = Impl):
    """Models side by side: KV per token and sequence, memory, latency, throughput, max batch, ratios."""
    from .. import whatif

    t = whatif.compare(model, hardware, _ints(batch, "--batch"), _ints(context, "--context"), mode, weights_dtype,
                       kv_dtype, act_dtype, attention, _sets(sets), quantize_embeddings, impl)
    human = ["model", "batch", "context", "mode", "kv_bytes_per_token", "kv_bytes_per_seq", "memory_bytes", "fits",
             "latency_s", "throughput_tok_s", "max_batch", "kv_ratio", "latency_ratio", "throughput_ratio",
             "max_batch_ratio"]
    _out(render(t, _fmt(fmt), api.PHASE_COLUMNS + [c for c in ["impl"] if c in t] + ["kv_bytes_per_token", "max_batch"],
                human))
    if fmt == "table":
        _out(mode_note(mode, impl, hardware, _sets(sets)))


@app.command()
def speculative(alpha: str = typer.Option("0.6,0.8,0.9", "--alpha", metavar="<number list>", help="Acceptance rate(s) in [0, 1]."),
                gamma: str = typer.Option("1,2,3,4,5,8", "--gamma", metavar="<int list>", help="Draft tokens per round."),
                draft_cost: str = typer.Option("0.05", "--draft-cost", metavar="<number list>", help="Draft step / target step."),
                draft: Optional[str] = typer.Option(None, "--draft", metavar="<name>", help="Draft model: costs from the roofline."),
                target: Optional[str] = typer.Option(None, "--target", metavar="<name>", help="Target model."),
                hardware: str = Hardware, batch: str = typer.Option("1", "--batch", metavar="<int>", help="Batch size B: concurrent sequences per replica (one value)."),
                context: str = typer.Option("1024", "--context", metavar="<int>", help="Context S in tokens (one value)."), weights_dtype: str = WDtype,
                kv_dtype: Optional[str] = KVDtype, act_dtype: str = ADtype, sets: Optional[List[str]] = Sets,
                fmt: str = Fmt,
                mode: str = typer.Option("roofline", "--mode", metavar="<mode>", help="With --draft/--target: step costs from the roofline "
                                         "(the ideal bound) or achievable."),
                impl: Optional[str] = Impl):
    """Speculative decoding: expected tokens per round, speedup, best gamma (slower than plain is shown)."""
    from .. import whatif

    t = whatif.speculative(_floats(alpha, "--alpha"), _ints(gamma, "--gamma"), _floats(draft_cost, "--draft-cost"),
                           draft, target, hardware, _one(batch, "--batch"), _one(context, "--context"), weights_dtype, kv_dtype, act_dtype, _sets(sets),
                           mode, impl)
    cols = ["alpha", "gamma", "draft_cost", "expected_tokens", "speedup", "best_gamma"]
    extra = ["verify_cost", "slower"] + (["draft", "target", "batch", "context", "mode", "target_step_s"]
                                         + (["impl"] if "impl" in t else []) if draft else [])
    timed = [c for c in ("draft", "target", "batch", "context", "mode", "target_step_s", "impl") if c in t]
    _out(render(t, _fmt(fmt), cols + ["verify_cost", "slower"] + timed if draft else cols, cols + extra))
    if fmt == "table" and t["slower"].any():
        _out("# slower=true: speculation loses to plain decoding here (low alpha, costly draft, long gamma,"
             " or a verification pass that is no longer cheap at this batch)")
    if fmt == "table" and draft:
        _out(mode_note(mode, impl, hardware, _sets(sets)))


@app.command()
def attention(seq: str = typer.Option("512,2048,8192,32768,131072", "--seq", metavar="<int list>", help="Sequence lengths (comma list)."),
              heads: int = typer.Option(32, "--heads", metavar="<int>", help="Query heads."), head_dim: int = typer.Option(128, "--head-dim", metavar="<int>", help="Head dimension H."),
              kv_heads: Optional[int] = typer.Option(None, "--kv-heads", metavar="<int>", help="KV heads (default: --heads)."), batch: str = typer.Option("1", "--batch", metavar="<int>", help="Batch size B: concurrent sequences per replica (one value)."),
              dtype: str = typer.Option("fp16", "--dtype", metavar="<format>", help="Element format of Q, K, V and scores."),
              model: Optional[str] = typer.Option(None, "-m", "--model", metavar="<name list>", help="Take heads and head dim from a model."),
              sets: Optional[List[str]] = Sets, fmt: str = Fmt):
    """One attention call, fused (FlashAttention) against unfused: score matrix, HBM traffic, peak memory."""
    from .. import whatif

    t = whatif.attention_kernels(_ints(seq, "--seq"), heads, head_dim, kv_heads, _one(batch, "--batch"), dtype, model, _sets(sets))
    _out(render(t, _fmt(fmt), None, ["seq", "heads", "dtype", "score_bytes_per_head", "score_bytes_per_layer",
                                     "fused_hbm_bytes", "unfused_hbm_bytes", "traffic_ratio", "fused_peak_bytes",
                                     "unfused_peak_bytes"]))


@app.command("generation-cost")
def generation_cost(model: str = Model, tokens: str = typer.Option("256,1024,4096", "--tokens", metavar="<int list>", help="Tokens to generate (comma list)."),
                    batch: str = typer.Option("1", "--batch", metavar="<int>", help="Batch size B: concurrent sequences per replica (one value)."), weights_dtype: str = WDtype,
                    kv_dtype: Optional[str] = KVDtype, act_dtype: str = ADtype, sets: Optional[List[str]] = Sets,
                    fmt: str = Fmt):
    """MACs, bytes and memory to generate T tokens with a KV cache and without one (recomputing the prefix)."""
    from .. import whatif

    t = whatif.generation_cost(model, _ints(tokens, "--tokens"), _one(batch, "--batch"), weights_dtype, kv_dtype, act_dtype, _sets(sets))
    _out(render(t, _fmt(fmt), None, ["model", "tokens", "macs_cached", "macs_uncached", "macs_ratio", "bytes_cached",
                                     "bytes_uncached", "bytes_ratio", "memory_cached", "memory_uncached"]))

