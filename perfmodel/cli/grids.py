"""Sweeps over grids and multi-device plans: sweep, plan."""
from __future__ import annotations

import sys
from typing import List, Optional

import typer

from .. import api
from ..errors import SpecError
from ..report import render
from .common import (_one, ADtype, app, Cluster, Energy, Fmt, Hardware, Impl, KVDtype, Mode, mode_note, Price, Sets, WDtype, _ECON,
                     _fmt, _ints, _out, _sets)


def _auto(workers):
    return None if workers is not None and str(workers).strip().lower() == "auto" else workers


@app.command()
def sweep(models: str = typer.Option(api.DEFAULT_MODEL, "-m", "--model", "--models", metavar="<name list>", help="Model catalog name(s) or YAML path(s), comma list."),
          hardware: str = typer.Option(api.DEFAULT_HARDWARE, "-H", "--hardware", metavar="<name list>", help="Comma list of hardware."),
          batch: str = typer.Option("1:512:x2", "--batch", metavar="<int list>", help="List '1,8', geometric '1:512:x2' or arithmetic '1:1024:1'."),
          context: str = typer.Option("128:131072:x2", "--context", metavar="<int list>", help="Same syntax as --batch."),
          weights_dtype: str = typer.Option("bf16", "--weights-dtype", metavar="<format>", help="Comma list of formats."),
          kv_dtype: Optional[str] = typer.Option(None, "--kv-dtype", metavar="<format>", help="Comma list of KV formats."),
          act_dtype: str = ADtype, mode: str = Mode, sets: Optional[List[str]] = Sets,
          out: Optional[str] = typer.Option(None, "-o", "--out", metavar="<file>", help="Stream to FILE.csv or FILE.parquet (written whole or not at all)."),
          chunk_rows: int = typer.Option(1_000_000, "--chunk-rows", metavar="<int>", help="Rows evaluated per block (at most)."),
          max_rows: Optional[int] = typer.Option(None, "--max-rows", metavar="<int>", help="Refuse a grid of more rows than this; default 10,000,000 (about 14 s to CSV here)."),
          progress: Optional[bool] = typer.Option(None, "--progress/--no-progress", help="Default: on a terminal."),
          fmt: str = Fmt, impl: Optional[str] = Impl,
          workers: Optional[str] = typer.Option("1", "--workers", metavar="<int|auto>",
                                                help="Local worker processes evaluating the blocks (default 1; auto: the cores)."),
          cluster: Optional[str] = Cluster):
    """Decode metrics over a whole grid (models x hardware x formats x batch x context), vectorized."""
    from .. import grid as sw

    kv = kv_dtype.split(",") if kv_dtype else [None]
    max_rows = sw.MAX_ROWS if max_rows is None else max_rows
    if out:
        r = sw.sweep(models, hardware, batch, context, weights_dtype.split(","), kv, act_dtype, mode, _sets(sets),
                     out, chunk_rows, progress, impl, max_rows, _auto(workers), cluster)
        sys.stderr.write(f"wrote {r['rows']:,} rows to {r['path']} in {r['seconds']:.2f} s\n")
        return
    if chunk_rows < 1:
        raise SpecError("--chunk-rows", None, f"must be at least 1, got {chunk_rows}")
    n = sw.grid_size(models, hardware, batch, context, weights_dtype.split(","), kv, max_rows)
    if n > 100_000:
        raise SpecError("sweep", None, f"{n:,} rows: write them to a file with -o FILE.csv")
    t = api.concat(list(sw.iter_chunks(models, hardware, batch, context, weights_dtype.split(","), kv, act_dtype,
                                       mode, _sets(sets), chunk_rows, impl, max_rows, _auto(workers), cluster)))
    _out(render(t, _fmt(fmt)))
    if fmt == "table":
        _out(mode_note(mode, impl, hardware, _sets(sets)))


@app.command()
def plan(model: str = typer.Option("llama-3.1-70b", "-m", "--model", metavar="<name list>", help="Model catalog name or YAML path."), hardware: str = Hardware,
         gpus: int = typer.Option(8, "--gpus", metavar="<int>", help="Devices to spread over."),
         context: str = typer.Option("4096", "--context", metavar="<int>", help="Context S in tokens (one value)."), batch: str = typer.Option("1,8,32,128", "--batch", metavar="<int list>", help="Batch sizes B: concurrent sequences per replica (comma list)."),
         max_latency: Optional[str] = typer.Option(None, "--max-latency", metavar="<time>", help="Per-token latency limit, e.g. 50ms."),
         weights_dtype: str = WDtype, kv_dtype: Optional[str] = KVDtype, act_dtype: str = ADtype,
         sets: Optional[List[str]] = Sets, fmt: str = Fmt, price: Optional[str] = Price, energy: bool = Energy,
         mode: str = typer.Option("roofline", "--mode", metavar="<mode>", help="roofline (the ideal bound) or achievable."),
         impl: Optional[str] = Impl,
         show_all: bool = typer.Option(False, "--all", help="Print every layout, not only the Pareto front.")):
    """Every tp/pp/ep/replicas layout of N devices: latency, throughput per device, memory, Pareto front."""
    from .. import parallel

    t, summary = parallel.plan(model, hardware, gpus, _one(context, "--context"), _ints(batch, "--batch"), max_latency, weights_dtype,
                               kv_dtype, act_dtype, _sets(sets), price, energy, mode, impl)
    econ = [c for c in _ECON if c in t]
    extra = ["impl"] if "impl" in t else []
    flags = ["missing"] if any(t["missing"]) else []
    hidden = 0
    if not show_all:  # the Pareto front only (every row with --all)
        import numpy as np

        keep = np.asarray(t["pareto"], dtype=bool)
        if keep.any():
            hidden = int((~keep).sum())
            t = {c: np.asarray(v)[keep] for c, v in t.items()}
    _out(render(t, _fmt(fmt), parallel.PLAN_COLUMNS + extra + econ,
                ["tp", "pp", "ep", "replicas", "batch", "mode", "latency_s", "throughput_tok_s", "throughput_per_device",
                 "memory_bytes", "fits", "comm_time_s"] + flags + ["crosses_nodes", "pareto"] + econ))
    if fmt == "table":
        need = summary["min_devices"]
        _out("# pareto=true: no other fitting layout is both faster and more efficient per device"
             + (f" (latency <= {max_latency})" if max_latency else "")
             + f"\n# fewest devices that hold {summary['model']} at context {summary['context']:g}: "
             + (f"{need} ({summary['min_layout']})" if need else "none up to 4096")
             + (f"\n# {summary['skipped']} layouts left out: they cross nodes and {summary['hardware']} has no "
                "network_bandwidth" if summary["skipped"] else "")
             + (f"\n# warning: {summary['warning']}" if summary["warning"] else "")
             + (f"\n# {hidden} rows off the Pareto front left out (--all prints every row)" if hidden else ""))
        _out(mode_note(mode, impl, hardware, _sets(sets)))

