"""Shared pieces of the command line: the typer app, the options every command takes, parsing of
comma lists and --set, output, and the table footer. Command modules import from here, never from
each other."""
from __future__ import annotations

import sys
from typing import List, Optional

import typer
import yaml

from .. import api
from ..errors import SpecError
from ..specs import safe_yaml
from ..report import FORMATS

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  rich_markup_mode=None, help="Analytical roofline calculator for LLM inference.")

def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("perfmodel")
        except PackageNotFoundError:  # run from a checkout that was never installed
            from .. import __version__ as v
        sys.stdout.write(f"perfmodel {v}\n")
        raise typer.Exit()


@app.callback()
def _root(show_version: bool = typer.Option(False, "--version", is_eager=True, callback=_version,
                                            help="Print the version and exit.")):
    """Analytical roofline calculator for LLM inference."""


# ---------------------------------------------------------------- shared options
Model = typer.Option(api.DEFAULT_MODEL, "-m", "--model", metavar="<name list>", help="Model catalog name or YAML path (comma list allowed).")
Hardware = typer.Option(api.DEFAULT_HARDWARE, "-H", "--hardware", metavar="<name list>", help="Hardware catalog name or YAML path (comma list allowed).")
Mode = typer.Option("roofline", "--mode", metavar="<mode>", help="roofline: the ideal bound (per-op max(FLOPs/peak, bytes/bandwidth), no overheads); "
                    "achievable: what a good implementation reaches (measured kernel efficiencies and overheads); "
                    "simple: the lecture's (weights + B*KV)/bandwidth.")
Impl = typer.Option(None, "--impl", metavar="<name|file>", help="Implementation profile for --mode achievable: a name from `perfmodel list impl` "
                    "(default graphs) or a YAML path.")
def _formats_help() -> str:
    """Every storage format of the registry (perfmodel.formats), int<bits>-g<group> for any group size."""
    from ..formats import known_formats

    return ", ".join(f for f in known_formats() if not f.startswith("int4-g") and f != "int8-g32") + \
        ", int4-g<N>, int4-g<N>-zp, int8-g<N> (group of N weights per scale); `perfmodel formats` gives the bits"


_FORMATS = _formats_help()
WDtype = typer.Option("bf16", "--weights-dtype", metavar="<format>", help=f"Weight format: {_FORMATS}.")
KVDtype = typer.Option(None, "--kv-dtype", metavar="<format>", help=f"KV-cache format (default: the activation format): {_FORMATS}.")
ADtype = typer.Option("bf16", "--act-dtype", metavar="<format>", help="Activation/compute format: bf16, fp16, fp32, fp8, int8 or fp4 "
                      "(fp8/int8 compute at the 8-bit tensor rate, fp4 at the 4-bit rate where the device has one).")
Attn = typer.Option("fused", "--attention", metavar="<fused|unfused>", help="fused (FlashAttention: no score matrix in HBM) or unfused.")
Sets = typer.Option(None, "--set", metavar="<key=value>", help="Override a spec field: key=value (repeatable), e.g. n_kv_heads=8, memory_bandwidth='4 TB/s'.")
Workers = typer.Option(None, "--workers", metavar="<int>",
                       help="Local worker processes for the searches (default: this machine's cores; 1: this process).")
Cluster = typer.Option(None, "--cluster", metavar="<address>",
                       help="Run the searches on a Dask scheduler (tcp://host:8786, or 'local'); pip install 'perfmodel[cluster]'.")
Fmt = typer.Option("table", "--format", metavar="<table|json|csv>", help="table (for people), json or csv (SI units).")
TP = typer.Option(1, "--tp", metavar="<int>", help="Tensor-parallel devices per replica.")
PP = typer.Option(1, "--pp", metavar="<int>", help="Pipeline stages per replica.")
EP = typer.Option(1, "--ep", metavar="<int>", help="Expert-parallel device groups per replica (MoE).")
Replicas = typer.Option(1, "--replicas", metavar="<int>", help="Model replicas (data parallel).")
Micro = typer.Option(None, "--microbatches", metavar="<int>", help="Pipeline micro-batches (default: pp).")
Redundant = typer.Option(0, "--redundant-experts", metavar="<int>",
                         help="Extra expert slots R over the --ep groups, copies of hot experts (EPLB): (E + R) / ep experts a device.")
Price = typer.Option(None, "--price", metavar="<USD/h>", help="USD per device-hour, e.g. 2.49/h: adds cost_per_million_tokens.")
Energy = typer.Option(False, "--energy", help="Add energy_per_token_j (at measured power, else TDP: an upper bound).")
QEmb = typer.Option(False, "--quantize-embeddings", help="Quantize embeddings and LM head too (default: kept 16-bit).")


def _ints(text: str, opt: str) -> list[float]:
    """A comma list of counts: 1,8,64 or 4k,32k,128Ki (units.parse_count)."""
    from ..units import parse_count

    from ..fields import split_list

    items = split_list(text, opt)
    try:
        vals = [parse_count(x) for x in items]
    except ValueError:
        raise SpecError(opt, None, f"expected comma-separated numbers (4096, 128k = 128,000, 128Ki = 131,072), "
                                   f"got {text!r}") from None
    if not vals:
        raise SpecError(opt, None, "needs at least one value")
    return vals


def _one(text, opt: str) -> float:
    """One count (4096, 128k, 128Ki) for an option that takes a single value."""
    vals = _ints(text, opt)
    if len(vals) != 1:
        raise SpecError(opt, None, f"takes one value, got {text!r}")
    return vals[0]


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


class PipeClosed(BaseException):
    """stdout's reader went away (`| head`): a BaseException, so that click's EPIPE handler (exit 1) lets it
    through to main, which ends normally."""


def _out(text: str) -> None:
    try:
        sys.stdout.write(text + "\n")
    except BrokenPipeError:
        raise PipeClosed() from None


_ECON = ["cost_per_million_tokens", "energy_per_token_j"]


def _cols(t, extra=()):
    """The JSON contract's columns, plus the layout's and the economics' when asked for."""
    return api.PHASE_COLUMNS + [c for c in ["impl", "measured_share"] if c in t] + list(extra) + [c for c in api.LAYOUT_COLUMNS + _ECON
                                                                                 if c in t]


def _human(t, base):
    return base + [c for c in ["measured_share", "tp", "pp", "ep", "redundant_experts", "replicas", "comm_time_s"] + _ECON
                   if c in t]


PHASE_HUMAN = ["model", "hardware", "batch", "context", "mode", "latency_s", "throughput_tok_s", "weight_bytes",
               "kv_cache_bytes", "memory_bytes", "fits", "bound", "intensity"]


def mode_note(mode: str, impl=None, hardware=None, sets=None) -> str:
    """The footer line that says what kind of number a time is: an ideal bound or an achievable estimate."""
    if mode == "roofline":
        return ("# mode roofline: an ideal bound (datasheet peaks, no launch or scheduling cost); real systems are "
                "slower: --mode achievable estimates a good implementation")
    if mode == "simple":
        return "# mode simple: the lecture's memory-bound estimate, (weights + B * KV) / bandwidth, an ideal bound too"
    from ..specs import load_impl
    from ..timemodel import DEFAULT_IMPL

    im = load_impl(impl or DEFAULT_IMPL, sets)
    lines = [f"# mode achievable: an estimate, not a bound, of a good implementation (impl {im.key}: "
             f"{im.description or im.name}); docs/achievable.md derives each term"]
    if hardware is not None:
        for hw in api.specs(api.DEFAULT_MODEL, hardware, sets)[1]:
            a = hw.achievable
            if a is None:
                continue
            gemm = ", ".join(f"{k} {v:.2f}" for k, v in a.gemm_efficiency.items())
            lines.append(f"#   {hw.key}: HBM at {a.hbm_efficiency:.3g} of {hw.memory_bandwidth / 1e12:.3g} TB/s; GEMMs at "
                         f"{gemm} of peak; {a.kernel_latency * 1e6:.3g} us per kernel, {a.gemm_latency * 1e6:.3g} us per "
                         f"GEMM, {a.attention_latency * 1e6:.3g} us per attention kernel; host {im.launch * 1e6:.3g} us per "
                         f"launch, {im.step_overhead * 1e6:.3g} us per step"
                         + (f", {im.prefill_launch * 1e6:.3g} us per op of a step holding a prompt (no CUDA graph)"
                            if im.prefill_launch else ""))
            lines.append(kernels_note(hw, im))
    return "\n".join(x for x in lines if x)


def kernels_note(hw, im) -> str:
    """Which measured kernel tables priced the ops they cover (the measured_share column), or why none did."""
    from ..timemodel import TimeModel

    ks = TimeModel.achievable(hw, im).kernels_table
    host = ""
    if im.host_step or im.host_per_seq or im.step_per_seq:
        host = (f"; step loop: {im.host_step * 1e3:.3g} ms + {im.host_per_seq * 1e6:.3g} us per sequence overlapped with "
                f"the GPU, {im.step_overhead * 1e3:.3g} ms + {im.step_per_seq * 1e6:.3g} us per sequence not")
    if ks is not None:
        kinds = ", ".join(ks.kinds())
        left = f"; not used as measured: {', '.join(ks.rejected)}" if ks.rejected else ""
        from ..kernels import moe_backend_note

        moe = moe_backend_note(ks, im.moe_backend)
        return (f"#   {hw.key}: measured kernels from {ks.source} ({kinds}) price the ops they cover; measured_share is "
                f"their share of the device time, the rest is the datasheet model above{left}{moe}{host}")
    if im.engine and im.kernel_tables == "auto":
        from ..kernels import SYSTEMS, aic_dir

        why = ("the extra is not installed: pip install \"perfmodel[kernels]\"" if aic_dir() is None else
               f"AIConfigurator measures no {hw.key}" if (hw.key or "") not in SYSTEMS else "no table for this device")
        return f"#   {hw.key}: no measured kernels ({why}): every op is priced by the datasheet model above{host}"
    return f"#   {hw.key}: no measured kernels (impl kernel_tables: {im.kernel_tables}){host}" if host else ""


def _why(table, hardware, sets, prec=None) -> str:
    """A footer that says why: the ridge point against the step's intensity, and the formats used."""
    from ..whatif import quantization_note

    _, hws = api.specs(api.DEFAULT_MODEL, hardware, sets)
    dt = prec.formats()[1].peak if prec else "bf16"
    notes = [f"ridge of {hw.name}: {hw.ridge(dt):.0f} FLOP/B ({dt} peak / bandwidth)" for hw in hws]
    if prec and (prec.weights, prec.act, prec.kv) != ("bf16", "bf16", None):
        notes.append(quantization_note(prec))
    for name in dict.fromkeys(str(x) for x in table.get("model", ())):  # formats a spec pins win over --weights-dtype
        try:
            m = api.load_model(name, sets)
        except SpecError:  # a name the table shows but that is not a file (a derived variant): nothing pinned
            continue
        if m.weight_formats:
            pinned = ", ".join(f"{g} in {f}" for g, f in m.weight_formats)
            notes.append(f"{m.name} stores {pinned} (pinned by its spec, whatever --weights-dtype says)")
    if len(table["fits"]) and not all(table["fits"]):
        notes.append("fits=NO: weights + KV cache + activations exceed the device memory")
    notes.append("a step whose intensity is below the ridge is memory-bound; `perfmodel intensity` gives the per-op table")
    return "\n".join("# " + n for n in notes)

